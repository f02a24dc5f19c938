// What a center does as one server of several (cluster.servers): server 0 gives each worker a
// token for its id after the welcome; a server k > 0 takes the worker id a hello asks for only
// with server 0's token for it, and never from a live peer; a peer trusted with x~ (behind CURVE:
// any) may ask for it with a `snapshot` request, answered at once or, with kFlagFinal, once every
// worker has finished; a server waiting for that request leaves only on one carrying server 0's
// token. (Who else is refused: center_trust_test.cpp.)
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <tuple>

#include "center/server_directory.hpp"
#include "center/server_tokens.hpp"
#include "center_harness.hpp"
#include "test_support.hpp"

using namespace tether::testing;
using tether::ServerTokens;

namespace {

std::shared_ptr<const ServerTokens> test_tokens(std::uint8_t fill = 7, std::uint64_t nonce = 42) {
    ServerTokens::Key key;
    key.fill(fill);
    return std::make_shared<const ServerTokens>(key, nonce);
}

// A hello asking for `id`, showing `token` (none when empty) before its (empty) settings.
void hello_as(Channel& channel, std::uint32_t id, const std::string& token = {}) {
    Header h = header(MessageType::hello, 3, Dtype::utf8);
    h.worker_id = id;
    if (!token.empty()) h.flags |= tether::kFlagToken;
    channel.send(tether::encode(h), token.data(), token.size());
}

Header snapshot_request(std::uint64_t sequence, bool final) {
    Header h = header(MessageType::snapshot);
    h.sequence = sequence;
    h.flags = final ? tether::kFlagFinal : 0;
    return h;
}

// Server 0's word that the final range of request `sequence` arrived whole.
Header final_received(std::uint64_t sequence) {
    Header h = snapshot_request(sequence, true);
    h.flags |= tether::kFlagReceived;
    return h;
}

void send_with_token(Channel& channel, Header h, const std::string& token) {
    h.flags |= tether::kFlagToken;
    h.element_count = token.size();
    channel.send(tether::encode(h), token.data(), token.size());
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

TEST_CASE("server tokens: each vouches for one id or one final request, under one key") {
    const auto tokens = test_tokens();
    const std::string t5 = tokens->for_worker(5);
    REQUIRE(t5.size() == tether::kServerTokenBytes);
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(t5.data());
    CHECK(tokens->admits_worker(5, bytes, t5.size()));
    CHECK_FALSE(tokens->admits_worker(6, bytes, t5.size()));
    CHECK_FALSE(tokens->admits_final(5, bytes, t5.size()));  // a worker's token is no final request
    CHECK_FALSE(tokens->admits_worker(5, bytes, t5.size() - 1));
    CHECK_FALSE(test_tokens(8)->admits_worker(5, bytes, t5.size()));  // another key
    // Another nonce (another run of the same key) makes another token, which checks as well.
    const std::string other_run = test_tokens(7, 43)->for_worker(5);
    CHECK(other_run != t5);
    CHECK(tokens->admits_worker(5, reinterpret_cast<const std::uint8_t*>(other_run.data()), other_run.size()));
    std::string forged = t5;
    forged.back() ^= 1;
    CHECK_FALSE(tokens->admits_worker(5, reinterpret_cast<const std::uint8_t*>(forged.data()), forged.size()));
    const std::string f = tokens->for_final(3);
    CHECK(tokens->admits_final(3, reinterpret_cast<const std::uint8_t*>(f.data()), f.size()));
    CHECK_FALSE(tokens->admits_final(4, reinterpret_cast<const std::uint8_t*>(f.data()), f.size()));
    // Every holder of the center's CURVE secret key derives the same key; another secret, another.
    const std::string secret(40, 'a');
    const std::string from_a = ServerTokens::from_center_secret(secret)->for_worker(1);
    const auto* a = reinterpret_cast<const std::uint8_t*>(from_a.data());
    CHECK(ServerTokens::from_center_secret(secret)->admits_worker(1, a, from_a.size()));
    CHECK_FALSE(ServerTokens::from_center_secret(std::string(40, 'b'))->admits_worker(1, a, from_a.size()));
    CHECK_FALSE(ServerTokens::random()->admits_worker(1, a, from_a.size()));
}

TEST_CASE("server 0 of several sends each worker its token right after the welcome") {
    CenterOptions options = options_for(1);
    options.issues_tokens = true;
    options.tokens = test_tokens();
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    Frames frames;
    const Header h = receive(*worker, MessageType::token, frames);
    CHECK(h.worker_id == 0);
    CHECK(h.fingerprint == kFingerprint);
    CHECK(frames.payload.size() == tether::kServerTokenBytes);
    CHECK(options.tokens->admits_worker(0, frames.payload.data(), frames.payload.size()));
}

TEST_CASE("a server k > 0 takes the id server 0 gave only with its token, and never a live worker's") {
    CenterOptions options = options_for(2);
    options.membership.ids_from_hello = true;
    options.tokens = test_tokens();
    ServedCenter served(kAeasgd, options);
    auto a = served.connect("a"), b = served.connect("b"), c = served.connect("c");
    hello_as(*c, 5);  // no token
    CHECK(starts_with(receive_error(*c), "no token"));
    hello_as(*c, 5, options.tokens->for_worker(1));  // a token for another id
    CHECK(starts_with(receive_error(*c), "bad token"));
    hello_as(*c, 5, test_tokens(9)->for_worker(5));  // made under another key
    CHECK(starts_with(receive_error(*c), "bad token"));
    hello_as(*a, 5, options.tokens->for_worker(5));
    hello_as(*b, 1, options.tokens->for_worker(1));
    Frames frames;
    CHECK(receive(*a, MessageType::welcome, frames).worker_id == 5);
    CHECK(receive(*b, MessageType::welcome, frames).worker_id == 1);
    // Even server 0's own token does not take a live worker's place: a copy of it is refused.
    hello_as(*c, 5, options.tokens->for_worker(5));
    CHECK(starts_with(receive_error(*c), "id taken"));
    send(*a, exchange_header(1), {2.f, 0.f, 5.f});
    CHECK(receive(*a, MessageType::reply, frames).worker_id == 5);  // a kept its place
    // Once a left, server 0 may give id 5 to a new peer, and its token takes the place here.
    send(*a, header(MessageType::bye), {});
    hello_as(*c, 5, options.tokens->for_worker(5));
    CHECK(receive(*c, MessageType::welcome, frames).worker_id == 5);
    served.finish();
    CHECK(served.center().stats().workers_lost == 0);
    CHECK(served.center().stats().workers_joined == 3);
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::bad_token) == 2);
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::id_taken) == 1);
}

TEST_CASE("without a shared key a server k > 0 checks no token, but still evicts no live worker") {
    CenterOptions options = options_for(2);
    options.membership.ids_from_hello = true;
    ServedCenter served(kAeasgd, options);
    auto a = served.connect("a"), b = served.connect("b"), c = served.connect("c");
    hello_as(*a, 5);
    hello_as(*b, 1);
    Frames frames;
    CHECK(receive(*a, MessageType::welcome, frames).worker_id == 5);
    CHECK(receive(*b, MessageType::welcome, frames).worker_id == 1);
    hello_as(*c, 5);
    CHECK(starts_with(receive_error(*c), "id taken"));
    send(*a, exchange_header(1), {2.f, 0.f, 5.f});
    CHECK(receive(*a, MessageType::reply, frames).worker_id == 5);
    served.finish();
    CHECK(served.center().stats().workers_lost == 0);
}

TEST_CASE("snapshot requests: answered at once, or with kFlagFinal once every worker is done") {
    CenterOptions options = options_for(1);
    options.end.await_final_snapshot = true;
    options.snapshots.snapshots_for_any_peer = true;  // as behind CURVE, where server 0 holds an allowed key
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
    // Answered, but the answer may still be on the link: the server stays until it is confirmed.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    CHECK_FALSE(served.done());
    send(*monitor, final_received(2), {});
    REQUIRE(served.wait_until_done(5000));
    CHECK(served.center().final_missing().empty());
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::too_many_requests) == 1);
}

TEST_CASE("a server waiting for the final request leaves after join_timeout_ms without it, saying so") {
    CenterOptions options = options_for(1);
    options.end.await_final_snapshot = true;
    options.membership.join_timeout_ms = 400;
    ServedCenter served(kAeasgd, options);
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    send(*worker, header(MessageType::bye), {});
    TempDir dir;
    StderrCapture captured(dir.file("stderr.txt"));
    CHECK(served.wait_until_done(5000));
    CHECK(contains(captured.text(), "no request for the final x~ within 400 ms"));
    // The run's final model lacks this range: the rank's process must not report success.
    CHECK(contains(served.center().final_missing(), "lacks this server's range"));
}

TEST_CASE("a server whose final answer is never confirmed leaves join_timeout_ms after it, saying its range may be missing") {
    CenterOptions options = options_for(1);
    options.end.await_final_snapshot = true;
    options.snapshots.snapshots_for_any_peer = true;
    options.membership.join_timeout_ms = 400;
    ServedCenter served(kAeasgd, options);
    auto lead = served.connect("server-0-snapshots");
    auto worker = served.connect("worker");
    join(*worker, 0, kInitial);
    send(*worker, header(MessageType::bye), {});
    TempDir dir;
    StderrCapture captured(dir.file("stderr.txt"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the request comes late: the wait counts from the answer
    send(*lead, snapshot_request(1, true), {});
    receive_snapshot(*lead, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    CHECK_FALSE(served.done());  // 550 ms after the run's end, 250 after the answer
    CHECK(served.wait_until_done(5000));
    CHECK(contains(captured.text(), "did not confirm within 400 ms"));
    CHECK(contains(served.center().final_missing(), "may be missing from the run's final model"));
}

TEST_CASE("a server waiting for the final request leaves on server 0's token, not on a stranger's request") {
    CenterOptions options = options_for(1);
    options.end.await_final_snapshot = true;
    options.snapshots.snapshots_for_any_peer = true;  // as behind CURVE: the stranger holds an allowed key
    options.membership.ids_from_hello = true;
    options.tokens = test_tokens();
    ServedCenter served(kAeasgd, options);
    auto stranger = served.connect("stranger"), lead = served.connect("server-0-snapshots");
    auto worker = served.connect("worker");
    hello_as(*worker, 0, options.tokens->for_worker(0));
    Frames frames;
    receive(*worker, MessageType::welcome, frames);
    send(*stranger, snapshot_request(1, true), {});  // no token
    CHECK(starts_with(receive_error(*stranger), "bad token"));
    send_with_token(*stranger, snapshot_request(2, true), options.tokens->for_worker(0));  // a worker's token
    CHECK(starts_with(receive_error(*stranger), "bad token"));
    send_with_token(*stranger, snapshot_request(3, true), options.tokens->for_final(4));  // another request's
    CHECK(starts_with(receive_error(*stranger), "bad token"));
    send(*stranger, snapshot_request(5, false), {});  // x~ now: what any trusted peer may ask
    receive_snapshot(*stranger, 5);
    send(*worker, header(MessageType::bye), {});
    // Done training: still there for server 0's request, answered, after which it leaves.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    send_with_token(*lead, snapshot_request(6, true), options.tokens->for_final(6));
    receive_snapshot(*lead, 6);
    send(*stranger, final_received(6), {});  // a confirmation needs the token too
    CHECK(starts_with(receive_error(*stranger), "bad token"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(served.done());
    send_with_token(*lead, final_received(6), options.tokens->for_final(6));
    CHECK(served.wait_until_done(5000));
    CHECK(served.center().stats().rejected.at(tether::ErrorCode::bad_token) == 4);
}

TEST_CASE("server 0's directory of the ranks' servers: complete once all said, then frozen; another x~(0) refused") {
    const float x[3] = {1, 2, 3}, other[3] = {1, 2, 4};
    tether::ServerDirectory directory(2, tether::initial_vector_hash(x, 3));
    auto a = directory.enter(1, "tcp://h1:2", tether::initial_vector_hash(x, 3));
    CHECK(a.error.empty());
    CHECK(a.missing == std::vector<std::size_t>{0});
    CHECK(directory.enter(1, "tcp://h1b:2", tether::initial_vector_hash(x, 3)).error.empty());  // not complete: the newest holds
    a = directory.enter(0, "tcp://h0:1", tether::initial_vector_hash(x, 3));
    CHECK(a.addresses == std::vector<std::string>{"tcp://h0:1", "tcp://h1b:2"});
    CHECK(directory.addresses(std::chrono::milliseconds(0)) == a.addresses);
    CHECK(directory.enter(1, "tcp://h1b:2", tether::initial_vector_hash(x, 3)).error.empty());  // a restart, same host
    CHECK(directory.enter(1, "tcp://elsewhere:2", tether::initial_vector_hash(x, 3)).error.find("cannot move") != std::string::npos);
    CHECK(directory.enter(1, "tcp://h1b:2", tether::initial_vector_hash(other, 3)).error.find("another model than rank 0") !=
          std::string::npos);
    CHECK(directory.enter(2, "tcp://h2:3", tether::initial_vector_hash(x, 3)).error.find("servers 0..1") != std::string::npos);
}

TEST_CASE("a lost rank's range moved in the directory: asked where with the lost address, a comeback told the list") {
    const float x[3] = {1, 2, 3};
    const std::uint64_t hash = tether::initial_vector_hash(x, 3);
    tether::ServerDirectory directory(2, hash);
    directory.enter(0, "tcp://h0:1", hash);
    directory.enter(1, "tcp://h1:2", hash);
    CHECK(directory.entered_within(1, std::chrono::seconds(60)));  // just (re)started: not taken over
    CHECK_FALSE(directory.entered_within(1, std::chrono::milliseconds(0)));
    // Not moved yet: the asker asks again.
    CHECK(directory.where(1, "tcp://h1:2").missing == std::vector<std::size_t>{1});
    directory.move(1, "tcp://h0:7");
    const auto moved = directory.where(1, "tcp://h1:2");
    CHECK(moved.missing.empty());
    CHECK(moved.addresses == std::vector<std::string>{"tcp://h0:1", "tcp://h0:7"});
    // Rank 1 back on its host: no refusal, the list as it is (it rejoins as a worker).
    const auto back = directory.enter(1, "tcp://h1:2", hash);
    CHECK(back.error.empty());
    CHECK(back.addresses == moved.addresses);
    const auto request = tether::parse_directory_request(tether::directory_request(1, "tcp://h1:2", hash, true), 2);
    CHECK(request.lost);
    CHECK_FALSE(tether::parse_directory_request(tether::directory_request(1, "tcp://h1:2", hash), 2).lost);
}
