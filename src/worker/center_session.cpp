#include "worker/center_session.hpp"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "codec/wire_vector.hpp"

namespace tether {

namespace {
// The center answered "unknown worker" to an exchange: it restarted (or counted this worker
// lost); the worker joins again and goes on.
struct CenterForgotThisWorker {};
}  // namespace

CenterSession::CenterSession(std::unique_ptr<Channel> channel, SessionOptions options, std::size_t num_parameters)
    : channel_(std::move(channel)), options_(std::move(options)), num_parameters_(num_parameters) {
    if (lossy(options_.payload_codec.kind))
        payload_sender_ = std::make_unique<WireSender>(options_.payload_codec, options_.wire_kinds.payload, num_parameters_,
                                                       options_.shard_elements);
    if (lossy(options_.reply_codec.kind))
        reply_receiver_ = std::make_unique<WireReceiver>(options_.reply_codec, options_.wire_kinds.reply, num_parameters_,
                                                         options_.shard_elements);
}

CenterSession::~CenterSession() {
    if (!said_bye_ && channel_) channel_->abandon();
}

Header CenterSession::base_header(MessageType type) const {
    Header h;
    h.type = type;
    h.worker_id = worker_id_;
    h.fingerprint = options_.fingerprint;
    h.center_version = pull_version_;
    h.local_step = steps_;
    h.samples = samples_;
    h.sequence = sequence_;
    return h;
}

void CenterSession::send(const Header& header, const void* payload, std::size_t bytes) {
    const auto encoded = encode(header);
    try {
        channel_->send(encoded, payload, bytes);
    } catch (const DeliveryError& e) {
        throw DeliveryError("the center at " + options_.center_address + ": " + e.what());
    }
    bytes_sent_ += encoded.size() + bytes;
    last_send_ = Clock::now();
}

void CenterSession::send(const Header& header, const Payload& payload) {
    const auto encoded = encode(header);
    try {
        channel_->send(encoded, payload);
    } catch (const DeliveryError& e) {
        throw DeliveryError("the center at " + options_.center_address + ": " + e.what());
    }
    bytes_sent_ += encoded.size() + payload.size();
    last_send_ = Clock::now();
}

bool CenterSession::receive(Frames& frames, int timeout_ms) {
    if (!stash_.empty()) {
        frames = std::move(stash_.front());
        stash_.pop_front();
        return true;
    }
    return channel_->receive(frames, timeout_ms);
}

Header CenterSession::receive_vector(MessageType type, Payload& out, int timeout_ms, std::uint64_t sequence) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    const auto center_timeout = std::chrono::milliseconds(options_.center_timeout_ms);
    Frames frames;
    std::uint32_t next_shard = 0;
    auto last_note = Clock::now();
    while (true) {
        if (closed_) throw SessionClosed{};
        // Rounded up: a deadline less than 1 ms away still waits, it does not spin. Waits are
        // sliced by the heartbeat: the worker says it is alive and learns whether the center is.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
        const int slice = int(std::min<long long>(left, std::max(options_.heartbeat_ms, 10)));
        if (left <= 0 || !receive(frames, slice)) {
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
                heartbeat_locked();
                if (while_waiting) while_waiting();
                continue;
            }
            throw std::runtime_error(std::string("no ") + to_string(type) + " from the center at " +
                                     options_.center_address + " within " + std::to_string(timeout_ms) +
                                     " ms; is the center running (and all cluster.workers started)?");
        }
        heard_from_center_ = true;
        last_heard_ = Clock::now();
        bytes_received_ += frames.header.size() + frames.payload.size();
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
        // Replies come through the reply codec; a welcome is float32.
        WireReceiver* decoder = type == MessageType::reply ? reply_receiver_.get() : nullptr;
        const Dtype dtype = decoder ? decoder->dtype() : Dtype::float32;
        const std::uint32_t encoding = decoder ? decoder->flags() : 0;
        if (h->shard_id != next_shard || h->dtype != dtype || (h->flags & kFlagChangeFromCopy) != encoding ||
            first + h->element_count > n || (last && first + h->element_count != n) ||
            (!decoder && frames.payload.size() != h->element_count * sizeof(float)))
            throw std::runtime_error(std::string("inconsistent ") + to_string(type) + " shard from the center (" +
                                     to_string(h->dtype) + ", expected " + to_string(dtype) + ")");
        if (decoder) {
            if (next_shard == 0) {
                out = assembled_.next(n * sizeof(float));
            }
            try {
                decoder->decode(h->shard_id, frames.payload.data(), frames.payload.size(), out.floats());
            } catch (const CodecError& e) {
                throw std::runtime_error(std::string("malformed ") + to_string(type) + " from the center: " + e.what());
            }
            if (last) decoder->commit(out.floats());
        } else if (h->shard_count == 1) {
            out = frames.payload;  // adopted: no copy
        } else {
            if (next_shard == 0) out = assembled_.next(n * sizeof(float));
            std::memcpy(out.floats() + first, frames.payload.data(), frames.payload.size());
        }
        if (++next_shard == h->shard_count) return *h;
    }
}

Welcome CenterSession::join() {
    std::lock_guard<std::mutex> lock(mutex_);
    return join_locked();
}

Welcome CenterSession::join_locked() {
    Header hello = base_header(MessageType::hello);
    hello.element_count = num_parameters_;
    hello.dtype = Dtype::utf8;
    send(hello, options_.agreed_settings.data(), options_.agreed_settings.size());
    Payload center;
    const Header h = receive_vector(MessageType::welcome, center, options_.join_timeout_ms, 0);
    Welcome welcome;
    welcome.center.assign(center.floats(), center.floats() + num_parameters_);
    welcome.worker_id = h.worker_id;
    welcome.version = h.center_version;
    worker_id_ = h.worker_id;
    pull_version_ = h.center_version;
    // Both ends of each compressed direction start again from this x~.
    if (payload_sender_) payload_sender_->reset(welcome.center.data());
    if (reply_receiver_) reply_receiver_->reset(welcome.center.data());
    return welcome;
}

void CenterSession::send_exchange(const Payload& payload, const Progress& at) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++sequence_;
    Header h = base_header(MessageType::exchange);
    h.local_step = at.steps;  // the snapshot's, which an overlapped exchange's training thread has left behind
    h.samples = at.samples;
    send_frames(h, payload);
}

ServerReply CenterSession::receive_reply() {
    std::lock_guard<std::mutex> lock(mutex_);
    ServerReply outcome;
    try {
        outcome.version = receive_vector(MessageType::reply, outcome.reply, options_.reply_timeout_ms, sequence_).center_version;
        pull_version_ = outcome.version;
    } catch (const CenterForgotThisWorker&) {
        std::fprintf(stderr, "worker %u: the center at %s does not know this worker any more (restarted?); joining again\n",
                     unsigned(worker_id_), options_.center_address.c_str());
        rejoining_ = true;
        outcome.rejoined = join_locked();
        rejoining_ = false;
        ++rejoins_;
    }
    return outcome;
}

void CenterSession::send_frames(Header h, const Payload& payload) {
    for_each_frame(h, payload, num_parameters_, options_.shard_elements, payload_sender_.get(),
                   [&](const Header& frame_header, const Payload& frame) { send(frame_header, frame); });
}

void CenterSession::heartbeat_locked() {
    if (Clock::now() - last_send_ < std::chrono::milliseconds(options_.heartbeat_ms)) return;
    send(base_header(MessageType::heartbeat), nullptr, 0);
}

void CenterSession::heartbeat_if_idle() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock() || said_bye_) return;
    heartbeat_locked();
    // Read the answers now, or a long pause would pile one up per heartbeat. Anything else the
    // center said (an error) waits in the stash for the next exchange to meet it.
    Frames frames;
    while (channel_->receive(frames, 0)) {
        std::string reason;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (h && h->type == MessageType::heartbeat) {
            heard_from_center_ = true;
            last_heard_ = Clock::now();
            bytes_received_ += frames.header.size();
        } else {
            stash_.push_back(std::move(frames));
        }
    }
}

void CenterSession::bye() {
    std::lock_guard<std::mutex> lock(mutex_);
    send(base_header(MessageType::bye), nullptr, 0);
    said_bye_ = true;
}

}  // namespace tether
