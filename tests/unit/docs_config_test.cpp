// docs/config.md and the parser agree: every key documented exists, every key parsed is
// documented, and a default the documentation gives as one value is the parser's. Keys are the
// backticked first cells of the tables in docs/config.md, defaults their third cells.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "config/known_keys.hpp"
#include "test_support.hpp"

namespace {

std::string config_doc() {
    const char* source = std::getenv("TETHER_SOURCE_DIR");
    REQUIRE_MESSAGE(source != nullptr, "set TETHER_SOURCE_DIR to the repository root (meson test does)");
    return tether::testing::read_text(std::string(source) + "/docs/config.md");
}

}  // namespace

TEST_CASE("every key in docs/config.md is accepted by the parser, and every parser key is documented") {
    const std::string doc = config_doc();
    std::set<std::string> documented;
    const std::regex row(R"(^\|\s*`([a-z_][a-z0-9_.]*)`\s*\|)", std::regex::multiline);
    for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator(); ++it)
        documented.insert((*it)[1]);
    std::set<std::string> parsed;
    for (const auto& key : tether::known_config_keys()) parsed.insert(key.path);
    REQUIRE(!parsed.empty());
    for (const auto& key : documented) CHECK_MESSAGE(parsed.count(key), "docs/config.md documents " << key << ", which the parser does not accept");
    for (const auto& key : parsed) CHECK_MESSAGE(documented.count(key), "the parser accepts " << key << ", which docs/config.md does not document");
}

TEST_CASE("every default docs/config.md gives as one value is the parser's") {
    const std::string doc = config_doc();
    std::map<std::string, std::string> parsed;
    for (const auto& key : tether::known_config_keys()) parsed[key.path] = key.default_value;
    // | `key` | type | `VALUE` | or | `VALUE`, meaning ... |; a default in words ("per strategy: ...") is skipped.
    const std::regex row(R"(^\|\s*`([a-z_][a-z0-9_.]*)`\s*\|[^|]*\|\s*`([^`]*)`\s*(,[^|]*)?\|)", std::regex::multiline);
    std::size_t compared = 0;
    for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator(); ++it) {
        const std::string key = (*it)[1], documented = (*it)[2];
        const auto found = parsed.find(key);
        if (found == parsed.end()) continue;  // the test above names it
        const auto value = nlohmann::json::parse(documented, nullptr, false);
        CHECK_MESSAGE(value == nlohmann::json::parse(found->second),
                      "docs/config.md gives " << key << " the default " << documented << "; the parser's is " << found->second);
        ++compared;
    }
    CHECK(compared > 70);
}
