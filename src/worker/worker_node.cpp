#include "worker/worker_node.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "util/all_finite.hpp"
#include "protocol/header.hpp"
#include "util/errors.hpp"

namespace tether {

using Clock = std::chrono::steady_clock;

namespace {
// The center answered "unknown worker" to an exchange: it restarted (or counted this worker
// lost); the worker joins again and goes on.
struct CenterForgotThisWorker {};
}  // namespace

WorkerNode::WorkerNode(std::unique_ptr<Channel> channel, WorkerOptions options, std::size_t num_parameters)
    : channel_(std::move(channel)), options_(std::move(options)), num_parameters_(num_parameters) {}

WorkerNode::~WorkerNode() {
    if (!finished_ && channel_) channel_->abandon();
}

Header WorkerNode::base_header(MessageType type) const {
    Header h;
    h.type = type;
    h.worker_id = result_.worker_id;
    h.fingerprint = options_.fingerprint;
    h.center_version = rule_ ? rule_->pull_version() : 0;
    h.local_step = result_.steps;
    h.samples = result_.samples;
    h.sequence = sequence_;
    return h;
}

void WorkerNode::send(const Header& header, const void* payload, std::size_t bytes) {
    const auto encoded = encode(header);
    try {
        channel_->send(encoded, payload, bytes);
    } catch (const DeliveryError& e) {
        throw DeliveryError("the center at " + options_.center_address + ": " + e.what());
    }
    result_.bytes_sent += encoded.size() + bytes;
    last_send_ = Clock::now();
}

void WorkerNode::send(const Header& header, const Payload& payload) {
    const auto encoded = encode(header);
    try {
        channel_->send(encoded, payload);
    } catch (const DeliveryError& e) {
        throw DeliveryError("the center at " + options_.center_address + ": " + e.what());
    }
    result_.bytes_sent += encoded.size() + payload.size();
    last_send_ = Clock::now();
}

Header WorkerNode::receive_vector(MessageType type, Payload& out, int timeout_ms, std::uint64_t sequence) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    const auto center_timeout = std::chrono::milliseconds(options_.center_timeout_ms);
    Frames frames;
    std::uint32_t next_shard = 0;
    auto last_note = Clock::now();
    while (true) {
        // Rounded up: a deadline less than 1 ms away still waits, it does not spin. Waits are
        // sliced by the heartbeat: the worker says it is alive and learns whether the center is.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        const int slice = int(std::min<long long>(left, std::max(options_.heartbeat_ms, 10)));
        if (left <= 0 || !channel_->receive(frames, slice)) {
            const auto now = Clock::now();
            if (heard_from_center_ && now - last_heard_ > center_timeout)
                throw std::runtime_error("the center at " + options_.center_address + " has been silent for " +
                                         std::to_string(options_.center_timeout_ms) +
                                         " ms (cluster.worker_timeout_ms) while this worker waited for a " + to_string(type) +
                                         ": it is gone or stalled");
            if (left > 0) {
                if (type == MessageType::welcome && now - last_note > std::chrono::seconds(5)) {
                    std::fprintf(stderr, "worker: still waiting for the center at %s to welcome us...\n",
                                 options_.center_address.c_str());
                    last_note = now;
                }
                heartbeat();
                continue;
            }
            throw std::runtime_error(std::string("no ") + to_string(type) + " from the center at " +
                                     options_.center_address + " within " + std::to_string(timeout_ms) +
                                     " ms; is the center running (and all cluster.workers started)?");
        }
        heard_from_center_ = true;
        last_heard_ = Clock::now();
        result_.bytes_received += frames.header.size() + frames.payload.size();
        std::string reason;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (!h) throw std::runtime_error("malformed message from the center: " + reason);
        if (h->type == MessageType::error) {
            const std::string text(frames.payload.begin(), frames.payload.end());
            if (text.rfind("unknown worker", 0) == 0) {
                if (type == MessageType::reply) throw CenterForgotThisWorker{};
                // Waiting for a welcome after joining again: answers to what was sent before the
                // hello, which all arrive before the welcome.
                if (type == MessageType::welcome && rejoining_) continue;
            }
            throw std::runtime_error("the center rejected this worker: " + text);
        }
        if (h->type == MessageType::heartbeat) continue;  // the center's answer: alive
        if (h->type != type) throw std::runtime_error(std::string("expected ") + to_string(type) + " from the center, got " + to_string(h->type));
        if (h->fingerprint != options_.fingerprint) throw std::runtime_error("the center trains a different model or strategy (fingerprint mismatch)");
        if (type == MessageType::reply && h->sequence != sequence) throw std::runtime_error("reply to exchange " + std::to_string(h->sequence) + " while waiting for " + std::to_string(sequence));
        const std::size_t n = num_parameters_, first = std::size_t(h->shard_id) * options_.shard_elements;
        const bool last = next_shard + 1 == h->shard_count;
        if (h->shard_id != next_shard || h->dtype != Dtype::float32 || first + h->element_count > n ||
            (last && first + h->element_count != n) || frames.payload.size() != h->element_count * sizeof(float))
            throw std::runtime_error(std::string("inconsistent ") + to_string(type) + " shard from the center");
        if (h->shard_count == 1) {
            out = frames.payload;  // adopted: no copy
        } else {
            if (next_shard == 0) out = Payload::allocate(n * sizeof(float));
            std::memcpy(out.floats() + first, frames.payload.data(), frames.payload.size());
        }
        if (++next_shard == h->shard_count) return *h;
    }
}

Welcome WorkerNode::join() {
    Header hello = base_header(MessageType::hello);
    hello.element_count = num_parameters_;
    hello.dtype = Dtype::utf8;
    send(hello, options_.agreed_settings.data(), options_.agreed_settings.size());
    Welcome welcome;
    Payload center;
    const Header h = receive_vector(MessageType::welcome, center, options_.join_timeout_ms, 0);
    welcome.center.assign(center.floats(), center.floats() + num_parameters_);
    welcome.worker_id = h.worker_id;
    welcome.version = h.center_version;
    result_.worker_id = h.worker_id;
    return welcome;
}

void WorkerNode::rejoin() {
    std::fprintf(stderr, "worker %u: the center at %s does not know this worker any more (restarted?); joining again\n",
                 result_.worker_id, options_.center_address.c_str());
    rejoining_ = true;
    const Welcome welcome = join();
    rejoining_ = false;
    backend_->copy_from_host(x_, welcome.center.data(), welcome.center.size() * sizeof(float));
    rule_->on_join(*backend_, x_, welcome.center.data(), welcome.version);
    backend_->synchronize();
    ++result_.rejoins;
}

void WorkerNode::exchange() {
    const auto started = Clock::now();
    ++sequence_;
    const std::size_t n = num_parameters_, shard = options_.shard_elements;
    if (!(payload_.unique() && payload_.size() == n * sizeof(float))) payload_ = Payload::allocate(n * sizeof(float));
    rule_->make_payload(*backend_, x_, payload_.floats());
    // A step can leave NaN or Inf in x while its loss was still finite: stop here, by name,
    // rather than have the center refuse the payload and count this worker lost later.
    if (!host::all_finite(payload_.floats(), n))
        throw DivergedError("diverged at step " + std::to_string(result_.steps) + " (non-finite parameters at exchange " +
                            std::to_string(sequence_) + ")");
    Header h = base_header(MessageType::exchange);
    h.dtype = Dtype::float32;
    h.shard_count = std::uint32_t((n + shard - 1) / shard);
    for (std::uint32_t s = 0; s < h.shard_count; ++s) {
        const std::size_t first = std::size_t(s) * shard, elements = std::min(shard, n - first);
        h.shard_id = s;
        h.element_count = elements;
        h.flags = s + 1 == h.shard_count ? kFlagLastShard : 0;
        send(h, payload_.slice(first * sizeof(float), elements * sizeof(float)));
    }
    Payload reply;
    Header reply_header;
    try {
        reply_header = receive_vector(MessageType::reply, reply, options_.reply_timeout_ms, sequence_);
    } catch (const CenterForgotThisWorker&) {
        rejoin();  // this window's work is replaced by x~ from the center
        steps_since_exchange_ = 0;
        return;
    }
    rule_->apply_reply(*backend_, x_, reply.floats(), reply_header.center_version);
    backend_->synchronize();  // the caller's next step may touch x (and the rule's buffers) at once
    steps_since_exchange_ = 0;
    ++result_.exchanges;
    result_.seconds_waiting += std::chrono::duration<double>(Clock::now() - started).count();
}

void WorkerNode::heartbeat() {
    if (Clock::now() - last_send_ < std::chrono::milliseconds(options_.heartbeat_ms)) return;
    send(base_header(MessageType::heartbeat), nullptr, 0);
}

void WorkerNode::start(Backend& backend, float* x, std::unique_ptr<WorkerRule> rule, const Welcome& welcome) {
    backend_ = &backend;
    x_ = x;
    rule_ = std::move(rule);
    backend.copy_from_host(x, welcome.center.data(), welcome.center.size() * sizeof(float));
    rule_->on_join(backend, x, welcome.center.data(), welcome.version);
    last_send_ = Clock::now();
}

bool WorkerNode::after_step(std::size_t samples) {
    ++result_.steps;
    result_.samples += samples;
    if (++steps_since_exchange_ >= std::size_t(options_.communication_window)) {
        exchange();
        return true;
    }
    heartbeat();
    return false;
}

WorkerResult WorkerNode::finish() {
    if (steps_since_exchange_ > 0) exchange();
    send(base_header(MessageType::bye), nullptr, 0);
    finished_ = true;
    return result_;
}

WorkerResult WorkerNode::train(LocalTrainer& trainer, std::unique_ptr<WorkerRule> rule, const Welcome& welcome) {
    start(trainer.backend(), trainer.parameters(), std::move(rule), welcome);
    const std::size_t total_steps = options_.epochs * trainer.steps_per_epoch();
    const auto& delays = options_.step_delay_ms;
    const auto delay = std::chrono::milliseconds(welcome.worker_id < delays.size() ? delays[welcome.worker_id] : 0);
    for (std::size_t step = 0; step < total_steps; ++step) {
        const std::size_t before = trainer.samples_seen();
        trainer.step();
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        after_step(trainer.samples_seen() - before);
    }
    return finish();
}

}  // namespace tether
