// The layering the strategy API promises, read from the sources: algorithms/ is a leaf written
// against the public header alone, and the public headers need nothing but the standard
// library and each other (an installed tether has no Requires: a user's compile must not need
// nlohmann, ZeroMQ or Thrust). Inside src/, dependencies flow one way: the embedding API, a
// cluster's settings and the run directory never reach up into the experiment harness.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;

struct Include {
    std::string file, target;
    bool angled;
};

std::vector<Include> includes_under(const fs::path& directory) {
    std::vector<Include> found;
    const std::regex line(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])", std::regex::multiline);
    for (const auto& entry : fs::directory_iterator(directory)) {
        const std::string ext = entry.path().extension().string();
        if (ext != ".hpp" && ext != ".cpp") continue;
        const std::string text = tether::testing::read_text(entry.path().string());
        for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it)
            found.push_back({entry.path().filename().string(), (*it)[2], (*it)[1] == "<"});
    }
    return found;
}

// <vector>, <cmath>: a standard header has no '/' and no '.'.
bool standard(const Include& i) { return i.angled && i.target.find_first_of("/.") == std::string::npos; }

fs::path source_dir() {
    const char* source = std::getenv("TETHER_SOURCE_DIR");
    REQUIRE_MESSAGE(source != nullptr, "set TETHER_SOURCE_DIR to the repository root (meson test does)");
    return source;
}

}  // namespace

TEST_CASE("algorithms/ includes only <tether/strategy.hpp> (and the exchange policy it includes), its own files and the standard library") {
    const auto includes = includes_under(source_dir() / "algorithms");
    REQUIRE(includes.size() > 20);
    for (const auto& i : includes) {
        CAPTURE(i.file);
        CAPTURE(i.target);
        CHECK((standard(i) || (i.angled && (i.target == "tether/strategy.hpp" || i.target == "tether/exchange_policy.hpp")) ||
               (!i.angled && i.target.rfind("algorithms/", 0) == 0)));
    }
}

TEST_CASE("the public headers include only the standard library and each other") {
    const auto includes = includes_under(source_dir() / "include" / "tether");
    REQUIRE(!includes.empty());
    for (const auto& i : includes) {
        CAPTURE(i.file);
        CAPTURE(i.target);
        CHECK((standard(i) || (i.angled && i.target.rfind("tether/", 0) == 0)));
    }
}

TEST_CASE("src/api, src/cluster and src/record include nothing of the folders above them (nor config/)") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> layers = {
        // The run directory takes a RecordSettings, not a RunConfig: the API fills one too.
        {"api", {"run/", "sweep/", "cli/", "config/"}},
        {"cluster", {"run/", "sweep/", "cli/", "config/", "api/", "record/"}},
        {"record", {"run/", "sweep/", "cli/", "api/", "config/"}},
    };
    for (const auto& [folder, above] : layers) {
        const auto includes = includes_under(source_dir() / "src" / folder);
        REQUIRE(!includes.empty());
        for (const auto& i : includes)
            for (const std::string& prefix : above) {
                CAPTURE(folder);
                CAPTURE(i.file);
                CHECK(i.target.rfind(prefix, 0) != 0);
            }
    }
}
