#include "center/center.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include <tether/errors.hpp>

#include "center/center_worker.hpp"
#include "center/checkpoint.hpp"
#include "center/server_tokens.hpp"
#include "protocol/framing.hpp"

namespace tether {

Center::Center(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<CenterRule> rule, std::vector<float> initial,
               CenterOptions options)
    : endpoint_(std::move(endpoint)), rule_(std::move(rule)), options_(options),
      float32_out_(ChunkFormat{initial.size(), options.updates.chunk_elements}), checkpoints_(options.snapshots.checkpoint_ms) {
    state_.x = std::move(initial);
    next_snapshot_samples_ = options_.snapshots.samples_per_snapshot;
    // Known only here, where the strategy's center rule is: a round waits for every worker.
    if (options_.membership.warmstart_samples > 0 && rule_->synchronous())
        throw ConfigError("cluster.warmstart_samples: " + std::to_string(options_.membership.warmstart_samples) +
                          " with a synchronous strategy; its rounds wait for every worker, so worker 0 cannot train "
                          "alone: use an asynchronous strategy (adag, downpour, dynsgd, aeasgd, ...) or 0");
}

Center::~Center() = default;

Center::Worker* Center::find(const std::string& peer) {
    const auto it = by_peer_.find(peer);
    return it == by_peer_.end() ? nullptr : it->second;
}

void Center::serve() {
    const auto join_deadline = Clock::now() + std::chrono::milliseconds(options_.membership.join_timeout_ms);
    checkpoints_.start(state_.version);
    std::string peer;
    Frames frames;
    std::optional<Clock::time_point> done_at;  // the last worker left
    while (!stop_requested_) {
        const bool received = endpoint_->receive(peer, frames, 50);
        std::lock_guard<std::mutex> lock(state_mutex_);
        if (received) handle(peer, frames);
        if (!started_ && Clock::now() > join_deadline)
            throw std::runtime_error(options_.name + " at " + address() + ": only " + std::to_string(stats_.workers_joined) +
                                     " of " + std::to_string(options_.membership.expected_workers) + " workers joined within " +
                                     std::to_string(options_.membership.join_timeout_ms) +
                                     " ms (cluster.join_timeout_ms); are the workers running and pointed here?");
        check_liveness();
        prune_departed();
        release_held();
        if (!round_.empty()) maybe_close_round(Clock::now() > round_opened_ + std::chrono::milliseconds(options_.rounds.round_timeout_ms));
        if (started_ && stats_.live_workers() == 0 && may_conclude(Clock::now()) && places_back(join_deadline)) {
            answer_final_snapshots();
            if (!options_.end.await_final_snapshot || final_answered_) break;
            if (!done_at) done_at = Clock::now();
            if (Clock::now() > *done_at + std::chrono::milliseconds(options_.membership.join_timeout_ms)) {
                std::fprintf(stderr, "%s: no request for the final x~ within %d ms (cluster.join_timeout_ms) of the last "
                             "worker leaving; is server 0 running?\n", options_.name.c_str(), options_.membership.join_timeout_ms);
                break;
            }
        }
        if (on_checkpoint && checkpoints_.due(Clock::now(), state_.version)) {
            on_checkpoint(checkpoint());
            checkpoints_.written(Clock::now());
        }
    }
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (on_checkpoint) on_checkpoint(checkpoint());
    maybe_snapshot(/*final=*/options_.snapshots.final_snapshot);
}

void Center::handle(const std::string& peer, Frames& frames) {
    std::string reason;
    const auto header = decode(frames.header.data(), frames.header.size(), reason);
    Worker* w = find(peer);
    stats_.bytes_received += frames.header.size() + frames.payload.size();
    if (frames.message_bytes > options_.max_message_bytes)
        return reject(peer, w ? w->id : 0, "message too large",
                      std::to_string(frames.message_bytes) + " bytes in all frames, at most " +
                          std::to_string(options_.max_message_bytes));
    if (!header) return reject(peer, w ? w->id : 0, reason, std::to_string(frames.header.size()) + "-byte header");
    // Asked before a worker knows the fingerprint: no join, and nothing of x~ in the answer.
    if (header->type == MessageType::settings) return answer_settings(peer, *header);
    if (header->fingerprint != options_.fingerprint) {
        std::string detail = "the worker trains a different model or strategy than this center";
        if (header->type == MessageType::hello && header->dtype == Dtype::utf8 && options_.explain_mismatch) {
            const std::size_t settings = hello_settings_offset(header->flags, frames.payload.size());
            const std::string difference =
                options_.explain_mismatch(std::string(frames.payload.begin() + settings, frames.payload.end()));
            if (!difference.empty()) detail = "settings differ: " + difference;
        }
        return reject(peer, header->worker_id, "wrong fingerprint", detail);
    }
    if (frames.extra_frames) return reject(peer, header->worker_id, "extra frames", "expected header + payload");
    if (header->type == MessageType::snapshot) {
        // x~ goes only to whom the run trusts with it: a joined worker (which holds x~ anyway),
        // or any peer where every peer is trusted (SnapshotOptions::snapshots_for_any_peer).
        if (!options_.snapshots.snapshots_for_any_peer && !(w && w->state == Worker::State::active))
            return reject(peer, header->worker_id, "not joined",
                          "only a joined worker, or with CURVE a peer holding an allowed key, may ask for x~");
        // A server that waits for the final request leaves once it is answered: only server 0's.
        if ((header->flags & kFlagFinal) && !admits_final_request(peer, *header, frames)) return;
        return answer_snapshot(peer, *header);
    }
    if (header->type == MessageType::heartbeat && w && w->state == Worker::State::joining) {
        w->last_seen = Clock::now();  // waiting for the others to join: alive, and told we are
        return answer_heartbeat(*w);
    }
    if (header->type == MessageType::hello) return handle_hello(peer, *header, frames);
    if (!w || w->state == Worker::State::lost || w->state == Worker::State::finished)
        return reject(peer, header->worker_id, "unknown worker", "send hello first");
    if (w->state == Worker::State::joining)
        return reject(peer, w->id, "not welcomed", "wait for the welcome (the center waits for all cluster.workers)");
    w->last_seen = Clock::now();
    // A worker's sample count comes from messages the center accepts, and it is bounded, so a
    // bad header can move neither the evaluation schedule nor the summary.
    const std::uint64_t samples = header->samples;  // validated in count_samples
    switch (header->type) {
        case MessageType::exchange:
            handle_exchange(*w, *header, frames, samples);
            return;
        case MessageType::buffers: return handle_buffers(*w, *header, frames);
        case MessageType::log: return handle_log(*w, *header, frames);
        case MessageType::heartbeat:
            count_samples(*w, samples);
            answer_heartbeat(*w);
            return maybe_snapshot(false);
        case MessageType::bye:
            count_samples(*w, samples);
            w->state = Worker::State::finished;
            rule_->on_leave(w->id);
            ++stats_.workers_finished;
            forget(*w);
            if (!round_.empty()) maybe_close_round(false);
            return;
        default: return reject(peer, w->id, "unexpected type", std::string("a worker does not send ") + to_string(header->type));
    }
}

void Center::welcome(Worker& w) {
    rule_->on_join(state_, w.id);
    w.state = Worker::State::active;
    w.pull_version = state_.version;
    w.last_seen = w.last_exchange = Clock::now();
    const std::size_t n = state_.x.size(), chunk = options_.updates.chunk_elements;
    w.from_worker = std::make_unique<ChunkAssembler>(ChunkFormat{n, chunk, options_.updates.payload_codec, options_.updates.wire_kinds.payload},
                                                     "exchange", "cluster.codec", /*refuse_non_finite=*/true);
    w.to_worker = std::make_unique<ChunkSender>(ChunkFormat{n, chunk, options_.updates.reply_codec, options_.updates.wire_kinds.reply});
    // The worker's x_i is the x~ it is welcomed with: both compressed directions start from it.
    w.from_worker->reset(state_.x.data());
    w.to_worker->reset(state_.x.data());
    Payload center = Payload::allocate(state_.x.size() * sizeof(float));
    std::memcpy(center.data(), state_.x.data(), center.size());
    send_vector(w, MessageType::welcome, center, 0);
    send_buffers(w);  // b~ right after x~: the worker takes both before it trains
    send_token(w);    // server 0 of several: what the other servers will ask the worker for
}

void Center::release_pending(Worker& w) {
    // The received frame, or a buffer of w.from_worker's, which keeps it for the next exchange.
    w.pending = Payload();
}

void Center::handle_exchange(Worker& w, const Header& h, const Frames& frames, std::uint64_t samples) {
    if (w.in_round) return reject(w.peer, w.id, "exchange in flight", "wait for the reply to the previous exchange");
    if (!check_exchange_order(w, h)) return;
    const ChunkAssembler::Result result = w.from_worker->add(h, frames.payload);
    if (result == ChunkAssembler::Result::refused)
        return reject(w.peer, w.id, w.from_worker->refusal().reason, w.from_worker->refusal().detail);
    if (h.chunk_index == 0) {
        w.sequence = h.sequence;
        w.pull_version = h.center_version;
        w.bytes_in = 0;
    }
    w.bytes_in += frames.header.size() + frames.payload.size();
    if (result == ChunkAssembler::Result::partial) return;
    w.last_exchange = Clock::now();
    w.accepted_sequence = w.sequence;
    count_samples(w, samples, /*exchange=*/true);
    w.pending = w.from_worker->take();
    complete_exchange(w);
}

bool Center::check_exchange_order(Worker& w, const Header& h) {
    if (h.chunk_index > 0 && w.from_worker->chunks_received() > 0) {
        if (h.sequence == w.sequence) return true;
        reject(w.peer, w.id, "stale sequence",
               "chunk " + std::to_string(h.chunk_index) + " of exchange " + std::to_string(h.sequence) + " while exchange " +
                   std::to_string(w.sequence) + " is being received");
        return false;
    }
    if (h.chunk_index > 0) return true;  // the assembler refuses it: no first chunk came
    // A replayed or reordered exchange would apply the same update twice, or an old one late.
    if (h.sequence <= w.accepted_sequence) {
        reject(w.peer, w.id, "stale sequence",
               "exchange " + std::to_string(h.sequence) + " after exchange " + std::to_string(w.accepted_sequence) +
                   " was accepted; each exchange must carry a higher sequence number");
        return false;
    }
    // A pull from the future would make staleness negative (DynSGD divides by v - v_pull + 1).
    if (h.center_version > state_.version) {
        reject(w.peer, w.id, "future version",
               "pulled at version " + std::to_string(h.center_version) + ", but x~ is at version " +
                   std::to_string(state_.version));
        return false;
    }
    return true;
}

void Center::complete_exchange(Worker& w) {
    const std::uint64_t staleness = state_.version - std::min(state_.version, w.pull_version);
    stats_.staleness_sum += double(staleness);
    stats_.staleness_max = std::max(stats_.staleness_max, staleness);
    ++stats_.staleness_count;
    ++stats_.exchanges;
    const Exchange exchange{w.id, w.pull_version, w.pending.floats(), state_.x.size()};
    if (rule_->synchronous()) {
        if (w.pull_version < state_.version) ++stats_.late_reports;  // missed a round: folded into this one
        rule_->contribute(state_, exchange);
        release_pending(w);
        if (round_.empty()) round_opened_ = Clock::now();
        w.in_round = true;
        round_.push_back(&w);
        maybe_close_round(false);
        return;
    }
    // The reply is written over the payload it answers and sent from there.
    const double norm = rule_->apply(state_, exchange, w.pending.floats());
    ++state_.version;
    ++stats_.updates_applied;
    const std::uint64_t before = stats_.bytes_sent;
    send_vector(w, MessageType::reply, w.pending, w.sequence);
    release_pending(w);
    if (on_exchange)
        on_exchange({w.id, w.sequence, state_.version, staleness, w.bytes_in, stats_.bytes_sent - before, norm});
    maybe_snapshot(false);
}

void Center::maybe_close_round(bool deadline_passed) {
    // A contributor lost while waiting still counts towards x~ (its x_i is in the round) but
    // not towards the live workers the round waits for.
    const int live = stats_.live_workers();
    const std::size_t waiting = std::size_t(std::count_if(round_.begin(), round_.end(),
                                                          [](const Worker* w) { return w->state != Worker::State::lost; }));
    const std::size_t quorum = std::max<std::size_t>(1, std::size_t(std::ceil(options_.rounds.quorum * live)));
    if (round_.empty() || (int(waiting) < live && !(deadline_passed && waiting >= quorum))) return;
    // One reply for every contributor, sent from one buffer.
    const Payload round_reply = round_replies_.next(state_.x.size() * sizeof(float));
    const double norm = rule_->close_round(state_, round_reply.floats());
    ++state_.version;
    ++stats_.updates_applied;
    ++stats_.rounds;
    std::vector<Worker*> contributors;
    contributors.swap(round_);
    const auto now = Clock::now();
    for (Worker* w : contributors) {
        w->in_round = false;
        w->last_seen = w->last_exchange = now;  // it was waiting on us, not silent
        const std::uint64_t before = stats_.bytes_sent;
        send_vector(*w, MessageType::reply, round_reply, w->sequence);
        if (on_exchange)
            on_exchange({w->id, w->sequence, state_.version, 0, w->bytes_in, stats_.bytes_sent - before, norm});
    }
    maybe_snapshot(false);
}

void Center::send_chunks(const std::string& peer, Header h, const Payload& data, ChunkSender& sender) {
    h.center_version = state_.version;
    h.fingerprint = options_.fingerprint;
    sender.send(h, data, [&](const Header& chunk_header, const Payload& chunk) {
        const auto header = encode(chunk_header);
        endpoint_->send(peer, header, chunk);
        stats_.bytes_sent += header.size() + chunk.size();
    });
}

void Center::send_vector(Worker& w, MessageType type, const Payload& data, std::uint64_t sequence) {
    // A worker that left (lost, or said bye while its synchronous round was open) gets nothing:
    // it reads no more, and its reply encoder went with it.
    if (w.state == Worker::State::lost || w.state == Worker::State::finished) return;
    Header h;
    h.type = type;
    h.worker_id = w.id;
    h.sequence = sequence;
    // How far its place got: a new holder trains the rest (a placeless joiner: nothing).
    if (type == MessageType::welcome) h.samples = w.placeless ? options_.membership.max_samples_per_worker : w.samples;
    try {
        // Replies go through the reply codec; a welcome is always float32 (both ends start from it).
        send_chunks(w.peer, h, data, type == MessageType::reply ? *w.to_worker : float32_out_);
    } catch (const DeliveryError& e) {
        lose(w, e.what());
    }
}

}  // namespace tether
