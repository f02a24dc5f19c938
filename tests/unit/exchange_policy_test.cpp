// Exchange policies (<tether/exchange_policy.hpp>): the default window, and streaming DiLoCo's
// fragments (algorithms/fragment_policy.hpp): fragment f after the steps t with
// (t - floor(f H / F)) mod H = 0; at most one fragment a step; each once a window.
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

#include "algorithms/fragment_policy.hpp"

using tether::FragmentPolicy;
using tether::WindowPolicy;

TEST_CASE("fragments go out staggered: H = 8, F = 4 sends fragment f after the steps 8k + 2f") {
    FragmentPolicy s(8, 4, {});
    std::vector<std::optional<std::size_t>> due;
    for (std::size_t t = 1; t <= 16; ++t) due.push_back(s.due(t));
    const std::vector<std::optional<std::size_t>> expected = {
        std::nullopt, 1, std::nullopt, 2, std::nullopt, 3, std::nullopt, 0,
        std::nullopt, 1, std::nullopt, 2, std::nullopt, 3, std::nullopt, 0};
    CHECK(due == expected);
}

TEST_CASE("every fragment goes out exactly once per window, and never two after one step, for any F <= H") {
    for (std::size_t H : {1, 2, 3, 5, 7, 10, 50, 64}) {
        for (std::size_t F = 1; F <= H && F <= 16; ++F) {
            CAPTURE(H);
            CAPTURE(F);
            FragmentPolicy s(int(H), F, {});
            std::map<std::size_t, std::vector<std::size_t>> steps;  // fragment -> steps it went out after
            for (std::size_t t = 1; t <= 3 * H; ++t)
                if (auto f = s.due(t)) steps[*f].push_back(t);
            REQUIRE(steps.size() == F);
            for (const auto& [f, ts] : steps) {
                CHECK(ts.size() == 3);
                CHECK(ts[0] == (f == 0 ? H : f * H / F));  // its offset, fragment 0 at the window's end
                CHECK(ts[1] - ts[0] == H);
                CHECK(ts[2] - ts[1] == H);
            }
            // Two fragments' steps are at least floor(H / F) apart: overlap_steps' bound.
            std::vector<std::size_t> all;
            for (std::size_t t = 1; t <= 3 * H; ++t)
                if (s.due(t)) all.push_back(t);
            for (std::size_t k = 1; k < all.size(); ++k) CHECK(all[k] - all[k - 1] >= H / F);
        }
    }
}

TEST_CASE("one fragment is plain DiLoCo: all of x after every H-th step") {
    FragmentPolicy s(5, 1, {});
    for (std::size_t t = 1; t <= 20; ++t) CHECK(s.due(t) == (t % 5 == 0 ? std::optional<std::size_t>(0) : std::nullopt));
}

TEST_CASE("the default policy: all of x after every H-th step since the last exchange, H changeable per worker") {
    WindowPolicy p(3);
    std::vector<std::size_t> due;
    for (std::size_t t = 1; t <= 9; ++t)
        if (p.due(t)) due.push_back(t);
    CHECK(due == std::vector<std::size_t>{3, 6, 9});
    // A center that sizes windows to the worker's speed: from the next exchange on.
    p.set_window(2);
    CHECK(p.window() == 2);
    due.clear();
    for (std::size_t t = 10; t <= 15; ++t)
        if (p.due(t)) due.push_back(t);
    CHECK(due == std::vector<std::size_t>{11, 13, 15});
    CHECK(p.fragments() == 0);
    CHECK_FALSE(p.landing().late());
    CHECK_THROWS_AS(p.set_window(0), std::invalid_argument);
}

TEST_CASE("a fragment policy's window changes its schedule: H = 8, F = 2 made H = 4 sends fragment 1 after 4k + 2") {
    FragmentPolicy s(8, 2, {1, std::nullopt});
    CHECK(s.due(4) == std::optional<std::size_t>(1));
    s.set_window(4);
    CHECK(s.due(6) == std::optional<std::size_t>(1));
    CHECK(s.due(8) == std::optional<std::size_t>(0));
    CHECK_FALSE(s.due(7));
    CHECK(s.landing().after_steps == 1);
    CHECK_THROWS_AS(s.set_window(1), std::invalid_argument);  // 2 fragments need 2 steps
}
