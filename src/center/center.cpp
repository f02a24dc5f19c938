#include "center/center.hpp"

#include <algorithm>
#include <cstring>

#include <tether/errors.hpp>

#include "center/center_worker.hpp"
#include "center/checkpoint.hpp"
#include "center/exchange_order.hpp"
#include "center/server_tokens.hpp"
#include "center/window_sizing.hpp"
#include "protocol/framing.hpp"

namespace tether {

Center::Center(std::unique_ptr<Endpoint> endpoint, std::unique_ptr<CenterRule> rule, std::vector<float> initial,
               CenterOptions options)
    : endpoint_(std::move(endpoint)), options_(options), updates_(std::move(rule), std::move(initial), options.updates, stats_),
      membership_(options.membership, stats_, options.name), rounds_(options.rounds), snapshots_(options.snapshots),
      end_(options.end, options.membership, options.name),
      float32_out_(ChunkFormat{updates_.size(), options.updates.chunk_elements}),
      refusals_(options.membership.max_peers) {
    // Known only here, where the strategy's center rule is: a round waits for every worker.
    if (options_.membership.warmstart_samples > 0 && updates_.synchronous())
        throw ConfigError("cluster.warmstart_samples: " + std::to_string(options_.membership.warmstart_samples) +
                          " with a synchronous strategy; its rounds wait for every worker, so worker 0 cannot train "
                          "alone: use an asynchronous strategy (adag, downpour, dynsgd, aeasgd, ...) or 0");
}

Center::~Center() = default;

void Center::serve() {
    end_.start(Clock::now());
    snapshots_.start(updates_.version());
    std::string peer;
    Frames frames;
    while (!stop_requested_) {
        const bool received = endpoint_->receive(peer, frames, 50);
        std::lock_guard<std::mutex> lock(state_mutex_);
        if (received) handle(peer, frames);
        if (tick()) break;
    }
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (on_checkpoint) on_checkpoint(checkpoint());
    maybe_snapshot(/*final=*/options_.snapshots.final_snapshot);
}

bool Center::tick() {
    for (const auto& [prefix, why] : ended_.take()) {
        std::vector<Worker*> gone;
        for (const auto& w : membership_.workers())
            if (w->live() && w->peer.rfind(prefix, 0) == 0) gone.push_back(w.get());
        for (Worker* w : gone) lose(*w, why);
    }
    end_.check_started(membership_.started(), stats_, Clock::now(), address());
    check_liveness(Clock::now());
    probe_round(Clock::now());
    membership_.prune();
    for (Worker* w : membership_.release_held()) welcome(*w);
    if (rounds_.open()) maybe_close_round(rounds_.past_deadline(Clock::now()));
    if (end_.over(membership_.started(), membership_.resumed(), stats_, Clock::now())) {
        answer_final_snapshots();
        if (end_.leaves(snapshots_.answered_final(), snapshots_.received_final(), Clock::now())) return true;
    }
    if (on_checkpoint && snapshots_.checkpoint_due(Clock::now(), updates_.version())) {
        on_checkpoint(checkpoint());
        snapshots_.checkpoint_written(Clock::now());
    }
    return false;
}

void Center::handle(const std::string& peer, Frames& frames) {
    stats_.bytes_received += frames.header.size() + frames.payload.size();
    Worker* w = membership_.find(peer);
    const std::optional<Header> h = checked_header(peer, w, frames);
    if (!h) return;
    switch (h->type) {  // what any peer may send
        case MessageType::settings: return answer_settings(peer, *h);
        case MessageType::servers: return answer_directory(peer, *h, frames);
        case MessageType::snapshot: return handle_snapshot(peer, w, *h, frames);
        case MessageType::hello: return handle_hello(peer, *h, frames);
        default: break;
    }
    if (!w || w->gone()) return reject(peer, h->worker_id, ErrorCode::unknown_worker, "send hello first");
    if (w->state == Worker::State::joining) {
        if (h->type != MessageType::heartbeat)
            return reject(peer, w->id, ErrorCode::not_welcomed, "wait for the welcome (the center waits for all cluster.workers)");
        w->last_seen = Clock::now();  // waiting for the others to join: alive, and told we are
        return answer_heartbeat(*w);
    }
    w->last_seen = Clock::now();
    // A worker's sample count comes from messages the center accepts, and it is bounded, so a
    // bad header can move neither the evaluation schedule nor the summary (Membership::count_samples).
    switch (h->type) {  // what only a welcomed worker sends
        case MessageType::exchange: return handle_exchange(*w, *h, frames);
        case MessageType::buffers: return handle_buffers(*w, *h, frames);
        case MessageType::log: return handle_log(*w, *h, frames);
        case MessageType::lease: return handle_lease(*w, *h, frames);
        case MessageType::heartbeat:
            membership_.count_samples(*w, h->samples);
            answer_heartbeat(*w);
            return maybe_snapshot(false);
        case MessageType::bye:
            membership_.finish(*w, h->samples);
            updates_.leave(w->id);
            // A lost worker's shard is its own to train (fixed shards): a link that comes back
            // after the others are done still brings it back, within the restart window.
            if (stats_.live_workers() == 0 && membership_.awaits_lost() && options_.membership.places_hold_shards)
                end_.all_silent(Clock::now(), /*finished=*/true);
            if (rounds_.open()) maybe_close_round(false);
            return;
        default: return reject(peer, w->id, ErrorCode::unexpected_type, std::string("a worker does not send ") + to_string(h->type));
    }
}

std::optional<Header> Center::checked_header(const std::string& peer, const Worker* w, const Frames& frames) {
    const std::uint32_t id = w ? w->id : 0;
    if (frames.message_bytes > options_.max_message_bytes) {
        reject(peer, id, ErrorCode::message_too_large,
               std::to_string(frames.message_bytes) + " bytes in all frames, at most " + std::to_string(options_.max_message_bytes));
        return std::nullopt;
    }
    ErrorCode malformed = ErrorCode::none;
    const auto h = decode(frames.header.data(), frames.header.size(), malformed);
    if (!h) {
        reject(peer, id, malformed, std::to_string(frames.header.size()) + "-byte header");
        return std::nullopt;
    }
    if (h->type == MessageType::settings) return h;  // asked before a worker knows the fingerprint: nothing of x~ in the answer
    if (h->fingerprint != options_.fingerprint) {
        std::string detail = "the worker trains a different model or strategy than this center";
        if (h->type == MessageType::hello && h->dtype == Dtype::utf8 && options_.explain_mismatch) {
            const std::size_t settings = hello_settings_offset(h->flags, frames.payload.size());
            const std::string difference =
                options_.explain_mismatch(std::string(frames.payload.begin() + settings, frames.payload.end()));
            if (!difference.empty()) detail = "settings differ: " + difference;
        }
        reject(peer, h->worker_id, ErrorCode::wrong_fingerprint, detail);
        return std::nullopt;
    }
    if (frames.extra_frames) {
        reject(peer, h->worker_id, ErrorCode::extra_frames, "expected header + payload");
        return std::nullopt;
    }
    return h;
}

void Center::welcome(Worker& w) {
    updates_.join(w);
    membership_.welcomed(w, Clock::now());
    send_vector(w, MessageType::welcome, updates_.welcome_copy(), 0);
    send_buffers(w);  // b~ right after x~: the worker takes both before it trains
    send_token(w);    // server 0 of several: what the other servers will ask the worker for
}

void Center::handle_exchange(Worker& w, const Header& h, const Frames& frames) {
    if (w.in_round) return reject(w.peer, w.id, ErrorCode::exchange_in_flight, "wait for the reply to the previous exchange");
    if (const auto refusal = exchange_out_of_order(w, h, updates_.version()))
        return reject(w.peer, w.id, refusal->code, refusal->detail);
    const ChunkAssembler::Result result = w.from_worker->add(h, frames.payload);
    if (result == ChunkAssembler::Result::refused)
        return reject(w.peer, w.id, w.from_worker->refusal().code, w.from_worker->refusal().detail);
    if (h.chunk_index == 0) {
        w.sequence = h.sequence;
        w.pull_version = h.center_version;
        w.exchange_steps = h.local_step;
        w.bytes_in = 0;
        w.bytes_out = 0;
        w.norm_squares = 0;
        w.streamed_chunks = 0;
        w.start_version = updates_.version();
    }
    w.bytes_in += frames.header.size() + frames.payload.size();
    if (result == ChunkAssembler::Result::partial) return;
    // A streamed chunk, or the whole exchange: the received frame itself when it came as one
    // float32 chunk (an asynchronous rule then answers in it, in place), else a buffer of the
    // assembler's, which keeps it for the next exchange. A copy: a failed reply loses the worker,
    // and its assembler with it.
    const bool streamed = result == ChunkAssembler::Result::piece;
    const ChunkPiece piece =
        streamed ? w.from_worker->piece() : ChunkPiece{w.from_worker->take(), 0, updates_.size(), true};
    apply_exchange(w, h, piece, h.samples, streamed);
}

void Center::apply_exchange(Worker& w, const Header& h, const ChunkPiece& piece, std::uint64_t samples, bool streamed) {
    Exchange exchange{w.id, w.pull_version, piece.payload.floats(), piece.count};
    exchange.offset = piece.first;
    exchange.last = piece.last;
    w.streamed_chunks = piece.last ? 0 : w.streamed_chunks + 1;
    // Counted before the last range moves x~'s version: the staleness the whole exchange had.
    std::uint64_t staleness = 0;
    if (piece.last) {
        w.last_exchange = Clock::now();
        w.accepted_sequence = w.sequence;
        membership_.count_samples(w, samples, /*exchange=*/true);
        staleness = updates_.receive(w.pull_version);
    }
    if (updates_.synchronous()) {
        updates_.contribute(exchange);
        if (!piece.last) return;
        rounds_.add(w, Clock::now());
        maybe_close_round(false);
        return;
    }
    // The reply is written over the range it answers and sent from there.
    const double norm = updates_.apply(exchange, piece.payload.floats());
    w.norm_squares += norm * norm;
    std::optional<int> window;
    if (piece.last && options_.updates.dynamic_windows) {
        record_step_rate(w, w.exchange_steps, Clock::now());
        window = sized_window(w, membership_.workers(), options_.updates.window);
    }
    const std::uint64_t before = stats_.bytes_sent;
    if (streamed) send_reply_piece(w, h, piece, window);
    else send_vector(w, MessageType::reply, piece.payload, w.sequence, window);
    w.bytes_out += stats_.bytes_sent - before;
    if (!piece.last) return;  // an exchange applied counts, even where its reply lost the worker
    if (on_exchange)
        on_exchange(
            {w.id, w.sequence, updates_.version(), staleness, w.bytes_in, w.bytes_out, std::sqrt(w.norm_squares)});
    maybe_snapshot(false);
}

void Center::send_reply_piece(Worker& w, const Header& exchange, const ChunkPiece& piece, std::optional<int> window) {
    if (w.gone()) return;
    Header h;
    h.type = MessageType::reply;
    h.dtype = Dtype::float32;
    h.worker_id = w.id;
    h.sequence = w.sequence;
    // The version the worker pulls: x~ as it was when its exchange began, plus its own update.
    // Exchanges that ended while it streamed reached only its later ranges; counting them as
    // not pulled keeps its next staleness from being too small (DynSGD, inverse damping).
    h.center_version = std::min(updates_.version(), w.start_version + 1);
    h.fingerprint = options_.fingerprint;
    h.chunk_index = exchange.chunk_index;
    h.chunk_count = exchange.chunk_count;
    h.element_count = piece.count;
    h.flags = piece.last ? kFlagLastChunk : 0;
    if (budget_met()) h.flags |= kFlagBudgetMet;
    if (window) {  // dynamic local updates: the worker's next window, on the last chunk it reads
        h.flags |= kFlagWindow;
        h.local_step = std::uint64_t(*window);
    }
    try {
        const auto header = encode(h);
        endpoint_->send(w.peer, header, piece.payload);
        stats_.bytes_sent += header.size() + piece.payload.size();
    } catch (const DeliveryError& e) {
        lose(w, e.what());
    }
}

void Center::maybe_close_round(bool deadline_passed) {
    if (!rounds_.complete(stats_.live_workers(), deadline_passed)) return;
    const UpdatePath::Closed closed = updates_.close_round();
    for (Worker* w : rounds_.close(Clock::now())) {
        const std::uint64_t before = stats_.bytes_sent;
        send_vector(*w, MessageType::reply, closed.reply, w->sequence);
        if (on_exchange)
            on_exchange({w->id, w->sequence, updates_.version(), 0, w->bytes_in, stats_.bytes_sent - before, closed.norm});
    }
    maybe_snapshot(false);
}

void Center::send_chunks(const std::string& peer, Header h, const Payload& data, ChunkSender& sender) {
    h.center_version = updates_.version();
    h.fingerprint = options_.fingerprint;
    sender.send(h, data, [&](const Header& chunk_header, const Payload& chunk) {
        const auto header = encode(chunk_header);
        endpoint_->send(peer, header, chunk);
        stats_.bytes_sent += header.size() + chunk.size();
    });
}

void Center::send_vector(Worker& w, MessageType type, const Payload& data, std::uint64_t sequence, std::optional<int> window) {
    // A worker that left (lost, or said bye while its synchronous round was open) gets nothing:
    // it reads no more, and its reply encoder went with it.
    if (w.gone()) return;
    Header h;
    h.type = type;
    h.worker_id = w.id;
    h.sequence = sequence;
    // How far its place got: a new holder trains the rest (a placeless joiner: nothing).
    if (type == MessageType::welcome) h.samples = w.placeless ? options_.membership.max_samples_per_worker : w.samples;
    if (type == MessageType::reply && budget_met()) h.flags |= kFlagBudgetMet;
    if (window) {  // dynamic local updates: the worker's next window
        h.flags |= kFlagWindow;
        h.local_step = std::uint64_t(*window);
    }
    try {
        // Replies go through the reply codec; a welcome is always float32 (both ends start from it).
        send_chunks(w.peer, h, data, type == MessageType::reply ? *w.to_worker : float32_out_);
    } catch (const DeliveryError& e) {
        lose(w, e.what());
    }
}

}  // namespace tether
