// What a center does as one server of several (cluster.servers): a server k > 0 takes the
// worker id a hello asks for (the one server 0 gave) and replaces a peer still holding it; a
// peer trusted with x~ (behind CURVE: any) may ask for it with a `snapshot` request, answered at
// once or, with kFlagFinal, once every worker has finished, and a server waiting for that
// request stays until it came. (Who else is refused: center_trust_test.cpp.)
#include <doctest/doctest.h>

#include <tuple>

#include "center_harness.hpp"
#include "test_support.hpp"

using namespace tether::testing;

namespace {

Header hello_as(std::uint32_t id) {
    Header h = header(MessageType::hello, 3);
    h.worker_id = id;
    return h;
}

Header snapshot_request(std::uint64_t sequence, bool final) {
    Header h = header(MessageType::snapshot);
    h.sequence = sequence;
    h.flags = final ? tether::kFlagFinal : 0;
    return h;
}

// Receives a snapshot answer: x~ and its version.
std::pair<Vec, std::uint64_t> receive_snapshot(Channel& channel, std::uint64_t sequence) {
    Frames frames;
    const Header h = receive(channel, MessageType::snapshot, frames);
    CHECK(h.sequence == sequence);
    CHECK(h.dtype == Dtype::float32);
    return {floats_of(frames), h.center_version};
}

}  // namespace

TEST_CASE("a server k > 0 takes the id server 0 gave, and replaces a peer still holding it") {
    CenterOptions options = options_for(2);
    options.ids_from_hello = true;
    ServedCenter served(kAeasgd, options);
    auto a = served.connect("a"), b = served.connect("b"), c = served.connect("c");
    send(*a, hello_as(5), {});
    send(*b, hello_as(1), {});
    Frames frames;
    CHECK(receive(*a, MessageType::welcome, frames).worker_id == 5);
    CHECK(receive(*b, MessageType::welcome, frames).worker_id == 1);
    // Server 0 gave id 5 to a new peer (it counted a lost): here, too, the id is c's now.
    send(*c, hello_as(5), {});
    CHECK(receive(*c, MessageType::welcome, frames).worker_id == 5);
    CHECK(starts_with(rejection(*a, tether::encode(exchange_header(1))), "unknown worker"));
    served.finish();
    CHECK(served.center().stats().workers_lost == 1);
    CHECK(served.center().stats().workers_joined == 3);
}

TEST_CASE("snapshot requests: answered at once, or with kFlagFinal once every worker is done") {
    CenterOptions options = options_for(1);
    options.await_final_snapshot = true;
    options.snapshots_for_any_peer = true;  // as behind CURVE, where server 0 holds an allowed key
    ServedCenter served(kAeasgd, options);
    auto monitor = served.connect("server-0-snapshots");  // never joins
    send(*monitor, snapshot_request(1, false), {});
    auto [x, version] = receive_snapshot(*monitor, 1);
    CHECK(x == kInitial);
    CHECK(version == 0);
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    send(*monitor, snapshot_request(2, true), {});  // waits for the end of the run
    Frames frames;
    CHECK_FALSE(monitor->receive(frames, 300));
    for (int i = 0; i < 16; ++i) send(*monitor, snapshot_request(3, true), {});  // the 17th waiting one is too many
    CHECK(starts_with(receive_error(*monitor), "too many requests"));
    send(*worker, exchange_header(1), {2.f, 0.f, 5.f});
    receive(*worker, MessageType::reply, frames);
    send(*worker, header(MessageType::bye), {});
    std::tie(x, version) = receive_snapshot(*monitor, 2);
    check_equal(x, {1.25f, -0.75f, 1.625f});  // after the exchange: e = 0.25 (x_i - x~)
    CHECK(version == 1);
    REQUIRE(served.wait_until_done(5000));  // answered: the server leaves by itself
    CHECK(served.center().stats().rejected.at("too many requests") == 1);
}

TEST_CASE("a server waiting for the final request leaves after join_timeout_ms without it, saying so") {
    CenterOptions options = options_for(1);
    options.await_final_snapshot = true;
    options.join_timeout_ms = 400;
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    send(*worker, header(MessageType::bye), {});
    TempDir dir;
    StderrCapture captured(dir.file("stderr.txt"));
    CHECK(served.wait_until_done(5000));
    CHECK(contains(captured.text(), "no request for the final x~ within 400 ms"));
}
