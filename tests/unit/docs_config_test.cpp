// docs/config.md and the parser agree: every key documented exists, every key parsed is
// documented. Keys are the backticked first cells of the tables in docs/config.md.
#include <doctest/doctest.h>

#include <cstdlib>
#include <regex>
#include <set>
#include <string>

#include "config/known_keys.hpp"
#include "test_support.hpp"

TEST_CASE("every key in docs/config.md is accepted by the parser, and every parser key is documented") {
    const char* source = std::getenv("TETHER_SOURCE_DIR");
    REQUIRE_MESSAGE(source != nullptr, "set TETHER_SOURCE_DIR to the repository root (meson test does)");
    const std::string doc = tether::testing::read_text(std::string(source) + "/docs/config.md");
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
