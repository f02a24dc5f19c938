// The center's model buffers (center/center_buffers.cpp, center/buffer_average.hpp): b~ is the
// mean of each worker's latest buffers, each worker once; a finished worker's stay; b~ follows
// every welcome; buffers messages are checked as any vector; the checkpoint keeps b~ (format 2)
// and still reads format 1.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <thread>

#include "center/checkpoint.hpp"
#include "center_harness.hpp"
#include "test_support.hpp"

using namespace tether::testing;  // the harness, and the protocol names it re-exports

namespace {

const Vec kBuffers0{1.f, 2.f};  // b~(0)

Header buffers_header(std::uint64_t sequence, std::uint64_t count = 2) {
    Header h = header(MessageType::buffers, count, Dtype::float32);
    h.sequence = sequence;
    h.flags = tether::kFlagLastChunk;
    return h;
}

// Joins a run in progress (x~ is whatever it is), then reads the b~ that follows the welcome.
Vec join_with_buffers(Channel& channel, std::uint32_t id) {
    send(channel, header(MessageType::hello, 3), {});
    Frames frames;
    CHECK(receive(channel, MessageType::welcome, frames).worker_id == id);
    const Header h = receive(channel, MessageType::buffers, frames);
    CHECK(h.worker_id == id);
    CHECK(h.dtype == Dtype::float32);
    return floats_of(frames);
}

// One exchange (aeasgd: any x_i is fine) preceded by the worker's buffers, as a worker sends them.
void exchange_with_buffers(Channel& channel, std::uint64_t sequence, const Vec& buffers) {
    send(channel, buffers_header(sequence), buffers);
    send(channel, exchange_header(sequence), {1.f, 1.f, 1.f});
    Frames frames;
    CHECK(receive(channel, MessageType::reply, frames).sequence == sequence);  // the reply, and nothing before it
}

// Messages of two peers are not ordered: a place is free once the center has counted the bye.
void wait_for_finished(const ServedCenter& served, int finished) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (served.center().stats_now().workers_finished < finished && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(served.center().stats_now().workers_finished == finished);
}

// Workers a and b say hello (the center welcomes once both have); both welcomes are followed by
// b~(0). Two peers' messages are not ordered, so either may be worker 0: returns a's id.
std::uint32_t join_both(Channel& a, Channel& b) {
    send(a, header(MessageType::hello, 3), {});
    send(b, header(MessageType::hello, 3), {});
    std::uint32_t ids[2] = {0, 0};
    int index = 0;
    for (Channel* channel : {&a, &b}) {
        Frames frames;
        ids[index++] = receive(*channel, MessageType::welcome, frames).worker_id;
        const Header h = receive(*channel, MessageType::buffers, frames);
        CHECK(h.element_count == 2);
        CHECK(floats_of(frames) == kBuffers0);
    }
    CHECK(ids[0] != ids[1]);
    return ids[0];
}

auto holding(const Vec& buffers) {
    return [buffers](tether::Center& c) { c.hold_buffers(buffers); };
}

}  // namespace

TEST_CASE("b~ is the mean of each worker's latest buffers, each worker once, a finished worker's kept until its id is taken") {
    ServedCenter served(kAeasgd, options_for(2), unique_inproc(), 2000, holding(kBuffers0));
    auto a = served.connect("worker-a");
    auto b = served.connect("worker-b");
    const std::uint32_t a_id = join_both(*a, *b);
    // a exchanges three times, b once: the mean is over workers, not over exchanges.
    exchange_with_buffers(*a, 1, {2.f, 4.f});
    exchange_with_buffers(*a, 2, {0.f, 0.f});
    exchange_with_buffers(*b, 1, {4.f, 8.f});
    exchange_with_buffers(*a, 3, {6.f, 10.f});
    send(*a, header(MessageType::bye), {});
    wait_for_finished(served, 1);
    // A worker taking a's place (its id) is welcomed with b~ = mean(a's last, b's).
    auto c = served.connect("worker-c");
    CHECK(join_with_buffers(*c, a_id) == Vec{5.f, 9.f});
    // c holds a's id now: its buffers replace a's (the mean of c's and b's, not of all three).
    exchange_with_buffers(*c, 1, {8.f, 10.f});
    std::vector<float> buffers;
    served.center().snapshot_now(&buffers);
    CHECK(buffers == Vec{6.f, 9.f});
    send(*c, header(MessageType::bye), {});
    send(*b, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    REQUIRE_FALSE(served.failure());
    CHECK(served.center().checkpoint().buffers == Vec{6.f, 9.f});  // the finished workers' stay
    CHECK(served.center().stats().rejected_total() == 0);
}

TEST_CASE("buffers messages are checked like every vector, refused when replayed, and refused by a center that holds none") {
    ServedCenter served(kAeasgd, options_for(1), unique_inproc(), 2000, holding(kBuffers0));
    auto a = served.connect("worker-a");
    join_with_buffers(*a, 0);
    CHECK(starts_with(rejection(*a, tether::encode(buffers_header(1, 3)), {1.f, 2.f, 3.f}), "wrong count"));
    CHECK(starts_with(rejection(*a, tether::encode(buffers_header(1)), {1.f, std::nanf("")}), "non-finite payload"));
    Header fp16 = buffers_header(1);
    fp16.dtype = Dtype::fp16;  // buffers are float32 whatever cluster.codec says
    CHECK(starts_with(rejection(*a, tether::encode(fp16), {1.f}), "wrong dtype"));
    exchange_with_buffers(*a, 1, {5.f, 5.f});
    // Buffers of an exchange already accepted (a replay) are refused too.
    CHECK(starts_with(rejection(*a, tether::encode(buffers_header(1)), {7.f, 7.f}), "stale sequence: buffers of exchange 1"));
    send(*a, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));
    CHECK(served.center().checkpoint().buffers == Vec{5.f, 5.f});  // the refused ones changed nothing
    CHECK(served.center().stats().rejected_total() == 4);

    ServedCenter plain(kAeasgd, options_for(1));
    auto w = plain.connect("worker-w");
    join(*w, 0, kInitial);
    CHECK(contains(rejection(*w, tether::encode(buffers_header(1)), {1.f, 2.f}), "unexpected type: center holds no model buffers"));
    send(*w, header(MessageType::bye), {});
    REQUIRE(plain.wait_until_done(5000));
    CHECK(plain.center().checkpoint().buffers.empty());
}

TEST_CASE("the checkpoint keeps b~ and each place's samples: written, read back, resumed, and sent after the next welcome") {
    TempDir dir;
    const std::string path = dir.file("checkpoint.bin");
    tether::Checkpoint written;
    written.fingerprint = kFingerprint;
    written.version = 7;
    written.total_samples = 640;
    written.x = {3.f, 4.f, 5.f};
    written.buffers = {0.25f, 8.f};
    written.places = {{0, 512}, {3, 128}};  // worker ids and what each place trained
    tether::write_checkpoint(path, written);
    const tether::Checkpoint read = tether::read_checkpoint(path);
    CHECK(read.version == 7);
    CHECK(read.x == written.x);
    CHECK(read.buffers == written.buffers);
    CHECK(read.places == written.places);

    ServedCenter served(kAeasgd, options_for(1), unique_inproc(), 2000, [&](tether::Center& c) {
        c.hold_buffers(kBuffers0);
        c.resume(read);
    });
    auto a = served.connect("worker-a");
    join(*a, 0, written.x);
    Frames frames;
    receive(*a, MessageType::buffers, frames);
    CHECK(floats_of(frames) == written.buffers);  // b~ from the checkpoint, not b~(0)
    send(*a, header(MessageType::bye), {});
    REQUIRE(served.wait_until_done(5000));

    // A checkpoint of another model's buffers is refused naming both counts.
    tether::Checkpoint other = written;
    other.buffers = {1.f, 2.f, 3.f};
    ServedCenter refusing(kAeasgd, options_for(1), unique_inproc(), 2000, [&](tether::Center& c) {
        c.hold_buffers(kBuffers0);
        CHECK_THROWS_WITH(c.resume(other), doctest::Contains("checkpoint holds 3 buffer elements, this center 2"));
    });
}

TEST_CASE("a format-1 checkpoint, written before buffers existed, still reads: without buffers") {
    TempDir dir;
    const std::string path = dir.file("checkpoint.bin");
    std::string bytes = "TETHCKPT";
    auto put = [&](std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) bytes.push_back(char(std::uint8_t(v >> (8 * i))));
    };
    put(1, 4);  // format 1
    for (std::uint64_t v : {kFingerprint, std::uint64_t(5), std::uint64_t(5), std::uint64_t(5), std::uint64_t(0),
                            std::uint64_t(320), std::uint64_t(2)})
        put(v, 8);  // fingerprint, version, updates, exchanges, rounds, samples, element count
    const float x[2] = {1.5f, -2.f};
    bytes.append(reinterpret_cast<const char*>(x), sizeof x);
    write_text(path, bytes);
    const tether::Checkpoint c = tether::read_checkpoint(path);
    CHECK(c.version == 5);
    CHECK(c.total_samples == 320);
    CHECK(c.x == Vec{1.5f, -2.f});
    CHECK(c.buffers.empty());
    write_text(path, bytes + "xx");
    CHECK_THROWS_WITH(tether::read_checkpoint(path), doctest::Contains("truncated or padded"));
}
