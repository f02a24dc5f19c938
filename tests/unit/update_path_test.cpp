// The update path alone (center/update_path.hpp): a strategy's CenterRule applying exchanges to
// x~, with no socket; the rules are the built-in ones, made from their JSON blocks.
#include <doctest/doctest.h>

#include <vector>

#include "center/update_path.hpp"
#include "config/config.hpp"

using tether::CenterStats;
using tether::Exchange;
using tether::UpdatePath;
using Vec = std::vector<float>;

namespace {

UpdatePath path(const nlohmann::json& strategy, const Vec& initial, CenterStats& stats) {
    const nlohmann::json document = {{"strategy", strategy}, {"cluster", {{"workers", 2}}}};
    return UpdatePath(tether::parse_config(document).cluster.strategy->make_center_rule({2, initial.size()}), initial,
                      tether::UpdateOptions{}, stats);
}

}  // namespace

TEST_CASE("an asynchronous rule applies each exchange at once: one version each, staleness counted") {
    CenterStats stats;
    UpdatePath updates = path({{"name", "downpour"}}, {1.f, -1.f, 0.5f}, stats);
    CHECK_FALSE(updates.synchronous());
    Vec delta{1.f, 1.f, 1.f}, reply(3);
    CHECK(updates.receive(0) == 0);
    updates.apply(Exchange{0, 0, delta.data(), 3}, reply.data());
    CHECK(updates.version() == 1);
    CHECK(updates.state().x == Vec{2.f, 0.f, 1.5f});  // x~ <- x~ + D
    CHECK(reply == updates.state().x);                 // reply x~
    // A second exchange pulled at version 0 missed one update.
    CHECK(updates.receive(0) == 1);
    updates.apply(Exchange{1, 0, delta.data(), 3}, reply.data());
    CHECK(updates.version() == 2);
    CHECK(stats.exchanges == 2);
    CHECK(stats.updates_applied == 2);
    CHECK(stats.staleness_max == 1);
    CHECK(stats.staleness_sum == 1.0);
    CHECK(stats.rounds == 0);
}

TEST_CASE("a synchronous rule collects a round and closes it into one reply; a report from an older version is late") {
    CenterStats stats;
    UpdatePath updates = path({{"name", "averaging"}}, {0.f, 0.f}, stats);
    CHECK(updates.synchronous());
    Vec a{2.f, 4.f}, b{4.f, 8.f};
    updates.contribute(Exchange{0, 0, a.data(), 2});
    updates.contribute(Exchange{1, 0, b.data(), 2});
    CHECK(updates.version() == 0);  // nothing applied before the round closes
    const UpdatePath::Closed closed = updates.close_round();
    CHECK(updates.version() == 1);
    CHECK(updates.state().x == Vec{3.f, 6.f});  // the mean of the x_i received
    CHECK(Vec(closed.reply.floats(), closed.reply.floats() + 2) == updates.state().x);
    CHECK(stats.rounds == 1);
    CHECK(stats.updates_applied == 1);
    CHECK(stats.late_reports == 0);
    updates.contribute(Exchange{0, 0, a.data(), 2});  // pulled before the last round closed
    CHECK(stats.late_reports == 1);
}

TEST_CASE("the update path goes on from a checkpoint's x~ and version") {
    CenterStats stats;
    UpdatePath updates = path({{"name", "downpour"}}, {0.f}, stats);
    updates.resume({5.f}, 7);
    CHECK(updates.version() == 7);
    CHECK(updates.state().x == Vec{5.f});
    CHECK(updates.receive(3) == 4);
}

TEST_CASE("a worker joins at the current version, with its exchanges in and replies out starting from x~") {
    CenterStats stats;
    UpdatePath updates = path({{"name", "downpour"}}, {1.f, 2.f}, stats);
    Vec delta{1.f, 1.f}, reply(2);
    updates.apply(Exchange{0, 0, delta.data(), 2}, reply.data());
    tether::CenterWorker w;
    updates.join(w);
    CHECK(w.pull_version == 1);
    REQUIRE(w.from_worker);
    REQUIRE(w.to_worker);
    CHECK(w.from_worker->chunks_received() == 0);
}
