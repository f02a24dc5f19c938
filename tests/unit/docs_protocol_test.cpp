// docs/protocol.md and the error codes agree: each rejection reason of its table ("Validation
// and rejection"), in order of first appearance, has the code the text gives it (from 2), and
// every code has a documented reason. A reason added on one side only fails here.
#include <doctest/doctest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "protocol/error_code.hpp"
#include "test_support.hpp"

TEST_CASE("every rejection reason in docs/protocol.md has its code, and every code is documented") {
    const char* source = std::getenv("TETHER_SOURCE_DIR");
    REQUIRE_MESSAGE(source != nullptr, "set TETHER_SOURCE_DIR to the repository root (meson test does)");
    const std::string doc = tether::testing::read_text(std::string(source) + "/docs/protocol.md");
    const auto table = doc.find("| reason | applies to | when |");
    REQUIRE(table != std::string::npos);
    const std::string rows = doc.substr(table, doc.find("\n\n", table) - table);
    std::vector<std::string> reasons;
    const std::regex row(R"(^\|\s*`([a-z -]+)`\s*\|)", std::regex::multiline);
    for (auto it = std::sregex_iterator(rows.begin(), rows.end(), row); it != std::sregex_iterator(); ++it) {
        const std::string reason = (*it)[1];
        bool seen = false;
        for (const auto& r : reasons) seen = seen || r == reason;
        if (!seen) reasons.push_back(reason);
    }
    REQUIRE(reasons.size() == tether::kLastErrorCode - 1);
    for (std::size_t i = 0; i < reasons.size(); ++i) {
        CAPTURE(reasons[i]);
        CHECK(std::string(tether::to_string(tether::ErrorCode(i + 2))) == reasons[i]);
    }
}
