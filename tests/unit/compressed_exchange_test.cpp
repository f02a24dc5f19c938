// Compressed exchanges through the real path: a worker's ServerSession and a Center over
// inproc://, with lossy codecs both ways. Error feedback makes what reached x~ follow the sum of
// the true updates, a worker's copy of x~ follows x~, an update reply (aeasgd's e) sums up to
// what the center applied, and the bytes counted are the compressed ones.
#include <doctest/doctest.h>

#include <cmath>
#include <future>
#include <random>
#include <thread>

#include "center/center.hpp"
#include "config/config.hpp"
#include "fake_center.hpp"
#include "random_vectors.hpp"
#include "worker/server_session.hpp"

namespace {

using namespace tether;
using namespace tether::testing;
using Vec = std::vector<float>;
constexpr std::uint64_t kFingerprint = 0x5eed;


// A center of `strategy` with the given codecs, serving on its own thread, and one worker session.
struct Link {
    std::shared_ptr<Transport> transport = make_zmq_transport();
    std::unique_ptr<Center> center;
    std::unique_ptr<ServerSession> session;
    std::thread serving;

    Link(const std::string& strategy, const Vec& initial, CodecOptions payload, CodecOptions reply, std::size_t frame) {
        static int counter = 0;
        const std::string address = "inproc://compressed-" + std::to_string(counter++);
        const nlohmann::json document = {{"strategy", {{"name", strategy}, {"communication_window", 1}}}};
        const RunConfig config = parse_config(document);
        CenterOptions c;
        c.fingerprint = kFingerprint;
        c.updates.chunk_elements = frame;
        c.updates.payload_codec = payload;
        c.updates.reply_codec = reply;
        c.updates.wire_kinds = config.cluster.strategy->wire_kinds();
        c.membership.worker_timeout_ms = 20000;
        center = std::make_unique<Center>(transport->bind(address, TransportOptions{}),
                                          config.cluster.strategy->make_center_rule({1, initial.size()}), initial, c);
        serving = std::thread([this] { center->serve(); });
        SessionOptions s;
        s.fingerprint = kFingerprint;
        s.chunk_elements = frame;
        s.payload_codec = payload;
        s.reply_codec = reply;
        s.wire_kinds = c.updates.wire_kinds;
        s.heartbeat_ms = 10000;  // none in these short tests: the byte counts are exact
        s.center_timeout_ms = 20000;
        s.server_address = address;
        session = std::make_unique<ServerSession>(transport->connect(address, "worker", TransportOptions{}), s, initial.size());
    }
    Vec exchange(const Vec& payload, std::uint64_t step) {
        Payload message = Payload::allocate(payload.size() * sizeof(float));
        std::copy(payload.begin(), payload.end(), message.floats());
        const ServerReply outcome = session->exchange(message, {step, step});
        REQUIRE_FALSE(outcome.rejoined);
        return Vec(outcome.reply.floats(), outcome.reply.floats() + payload.size());
    }
    Vec finish() {
        session->bye();
        serving.join();
        return center->state().x;
    }
};

}  // namespace

TEST_CASE("downpour, top-k both ways: x~ follows the sum of the true updates, the worker's copy follows x~") {
    const std::size_t n = 3000;
    const Vec initial = gaussian(n, 1, 0.5f);
    Link link("downpour", initial, {CodecKind::topk, 0.05}, {CodecKind::topk, 0.05}, 1024);  // 3 frames
    const Welcome welcome = link.session->join();
    CHECK(welcome.center == initial);  // a welcome is float32, exact
    Vec true_sum(n, 0.f), last_reply;
    double gap_at_10 = 0, gap_at_200 = 0;
    for (int t = 1; t <= 200; ++t) {
        const Vec update = gaussian(n, 100 + t, 0.01f, 0.002f);
        for (std::size_t i = 0; i < n; ++i) true_sum[i] += update[i];
        last_reply = link.exchange(update, std::uint64_t(t));
        Vec moved = link.center->snapshot_now().x;  // the center's x~ after this update
        for (std::size_t i = 0; i < n; ++i) moved[i] -= initial[i];
        const double relative = distance(moved, true_sum) / distance(true_sum, Vec(n, 0.f));
        if (t == 10) gap_at_10 = relative;
        if (t == 200) gap_at_200 = relative;
    }
    const Vec center = link.finish();
    CHECK(gap_at_200 < 0.5 * gap_at_10);
    CHECK(gap_at_200 < 0.25);
    // The worker's x~ (its copy, rebuilt from top-k changes) is close to x~ relative to how far
    // x~ moved.
    CHECK(distance(last_reply, center) < 0.3 * distance(center, initial));
    const CenterStats& stats = link.center->stats();
    CHECK(stats.rejected_total() == 0);
    // Frames of 1024, 1024 and 952 elements, of which ceil(5%) = 52, 52 and 48 go as (index,
    // value) pairs after 8 bytes of counts, instead of 4 bytes for every element.
    const std::uint64_t H = tether::kHeaderBytes;
    const std::uint64_t per_exchange = 3 * H + 2 * (8 + 8 * 52) + (8 + 8 * 48);
    CHECK(stats.bytes_received == 200 * per_exchange + H + H /* hello, bye */);
    CHECK(stats.bytes_sent == 3 * H + 4 * n /* the welcome, float32 */ + 200 * per_exchange);
    CHECK(link.session->bytes_sent() == stats.bytes_received);
}

TEST_CASE("aeasgd, bf16 out and int8 back: the worker's sum of e follows what the center applied") {
    const std::size_t n = 1000;
    const Vec initial(n, 0.f);
    Link link("aeasgd", initial, {CodecKind::bf16}, {CodecKind::int8}, 1 << 20);
    link.session->join();
    // The worker's x_i moves away from x~ every window; the center pulls x~ towards it and
    // answers e, which the worker subtracts.
    Vec x = initial;
    Vec applied(n, 0.f);  // sum of the e that arrived
    for (int t = 1; t <= 150; ++t) {
        const Vec step = gaussian(n, 300 + t, 0.02f, 0.01f);
        for (std::size_t i = 0; i < n; ++i) x[i] += step[i];
        const Vec e = link.exchange(x, std::uint64_t(t));
        for (std::size_t i = 0; i < n; ++i) x[i] -= e[i], applied[i] += e[i];
    }
    const Vec center = link.finish();
    // x~ - x~(0) is the exact sum of e; what the worker subtracted differs by one int8 residual.
    const double moved = distance(center, initial);
    REQUIRE(moved > 1.0);
    CHECK(distance(applied, center) < 1e-3 * moved);
    CHECK(link.center->stats().rejected_total() == 0);
    // bf16: 2 bytes an element; int8: 1 + 4 per 256.
    const std::uint64_t H = tether::kHeaderBytes;
    CHECK(link.center->stats().bytes_received == 150 * (H + 2 * n) + H + H);
    CHECK(link.center->stats().bytes_sent == (H + 4 * n) + 150 * (H + n + 4 * 4));
}

TEST_CASE("a worker refuses a compressed reply that does not decode, or comes in another dtype, naming it") {
    for (const std::string fault : {"truncated", "float32", "no flag"}) {
        CAPTURE(fault);
        tether::testing::FakeCenter center;  // answers by hand
        SessionOptions s;
        s.fingerprint = tether::testing::kFingerprint;
        s.reply_codec = {CodecKind::bf16};
        s.wire_kinds = {WireVector::update, WireVector::state};
        s.join_timeout_ms = s.reply_timeout_ms = 5000;
        s.server_address = "the-center";
        ServerSession session(center.transport->connect(center.endpoint->address(), "w", {}), s, 3);
        auto joined = std::async(std::launch::async, [&] { session.join(); });
        const auto hello = center.receive();
        center.send(hello.peer, MessageType::welcome, 0, {1, 2, 3});
        joined.get();
        Payload payload = Payload::allocate(12);
        auto exchanged = std::async(std::launch::async, [&] { session.exchange(payload, {1, 1}); });
        const auto exchange = center.receive();
        Header h;
        h.type = MessageType::reply;
        h.dtype = fault == "float32" ? Dtype::float32 : Dtype::bf16;
        h.flags = tether::kFlagLastChunk | (fault == "no flag" ? 0 : tether::kFlagChangeFromCopy);
        h.sequence = exchange.header.sequence;
        h.element_count = 3;
        h.fingerprint = tether::testing::kFingerprint;
        const std::vector<std::uint8_t> bytes(fault == "truncated" ? 5 : 6, 0);
        center.endpoint->send(exchange.peer, encode(h), bytes.data(), bytes.size());
        try {
            exchanged.get();
            FAIL("a bad reply was taken");
        } catch (const std::runtime_error& e) {
            const std::string what = e.what();
            CHECK(what.find(fault == "truncated" ? "malformed reply from the server: bf16: 5 bytes"
                                                 : "inconsistent reply chunk from the server") != std::string::npos);
        }
    }
}
