// The center's side of membership (center/membership.hpp decides): hellos checked before a
// join, welcomes or holds after it, losses told to the strategy, the round and the end of the
// run, and the small answers that keep a worker's waits bounded.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "center/center.hpp"
#include "center/center_worker.hpp"
#include "center/server_directory.hpp"

namespace tether {

void Center::handle_hello(const std::string& peer, const Header& h, const Frames& frames) {
    if (h.element_count != updates_.size())
        return reject(peer, 0, ErrorCode::wrong_count,
                      "worker has " + std::to_string(h.element_count) + " parameters, center " + std::to_string(updates_.size()));
    if (membership_.find(peer)) return reject(peer, h.worker_id, ErrorCode::duplicate_hello, "this worker already joined");
    if (options_.membership.ids_from_hello && !admits_id(peer, h, frames)) return;  // center_tokens.cpp
    if (membership_.peers() >= options_.membership.max_peers)
        return reject(peer, 0, ErrorCode::too_many_peers,
                      "the center holds " + std::to_string(membership_.peers()) + " peers (cluster.max_peers)");
    // The free place is a finished one while a peer whose connection closed (its process died)
    // may hold one untrained: that one is counted lost now, so that a restarted worker (a
    // supervisor's) takes its place, before its silence would tell after worker_timeout_ms.
    if (membership_.full() || membership_.would_give_finished(h.worker_id)) lose_disconnected();
    if (membership_.full())
        return reject(peer, 0, ErrorCode::run_full,
                      "all " + std::to_string(options_.membership.expected_workers) +
                          " places (cluster.workers) are taken and cluster.elastic is false");
    const auto [w, joined] = membership_.join(peer, h);
    end_.joined();
    // A worker back after this center's restart pulled its x~ last from the lost center: what
    // that had gained after the checkpoint is what the resume rolled back.
    if (stats_.resumed && rejoined_.insert(w->id).second && h.center_version > stats_.resumed_version)
        stats_.rolled_back_updates = std::max(stats_.rolled_back_updates, h.center_version - stats_.resumed_version);
    if (joined == Membership::Joined::waits) return;
    if (joined == Membership::Joined::joins_run) return welcome_or_hold(*w);
    if (on_start) on_start();
    if (membership_.warming_up())
        std::printf("%s: warmstart: worker 0 trains alone until %llu samples (cluster.warmstart_samples); the other "
                    "workers wait\n", options_.name.c_str(),
                    static_cast<unsigned long long>(options_.membership.warmstart_samples));
    for (Worker* joining : membership_.joining()) welcome_or_hold(*joining);
}

void Center::welcome_or_hold(Worker& w) {
    if (!membership_.hold(w)) return welcome(w);
    answer_heartbeat(w);  // with kFlagHeld: the worker's wait for its welcome starts again
}

void Center::answer_heartbeat(Worker& w) {
    // Tells a waiting worker that the center is alive (its waits are bounded by this), and
    // never waits itself: a peer that does not read loses the answer.
    Header h;
    h.type = MessageType::heartbeat;
    h.worker_id = w.id;
    h.center_version = updates_.version();
    h.fingerprint = options_.fingerprint;
    if (w.held) h.flags |= kFlagHeld;
    try {
        const auto header = encode(h);
        endpoint_->send(w.peer, header, nullptr, 0);
        stats_.bytes_sent += header.size();
    } catch (const DeliveryError&) {
        ++stats_.replies_dropped;
    }
}

void Center::answer_settings(const std::string& peer, const Header& request) {
    Header h;
    h.type = MessageType::settings;
    h.sequence = request.sequence;
    send_text(peer, h, options_.agreed_settings);  // dropped: the asker times out, naming the server
}

void Center::answer_directory(const std::string& peer, const Header& request, const Frames& frames) {
    if (!options_.directory)
        return reject(peer, request.worker_id, ErrorCode::not_a_directory,
                      "only server 0 of a run with a server on every rank (cluster.server_placement \"ranks\") keeps one");
    // Where the servers are steers every worker's traffic: only peers the run trusts may say
    // (with CURVE every peer holds an allowed key; security.insecure accepts anyone).
    if (!options_.snapshots.snapshots_for_any_peer)
        return reject(peer, request.worker_id, ErrorCode::not_trusted,
                      "a server's address is taken only where every peer holds an allowed CURVE key, or with security.insecure");
    ServerDirectory::Answer answer;
    try {
        const DirectoryRequest r =
            parse_directory_request(std::string(frames.payload.begin(), frames.payload.end()), options_.directory->size());
        answer = r.lost ? options_.directory->where(r.server, r.address)
                        : options_.directory->enter(r.server, r.address, r.initial_hash);
    } catch (const std::exception& e) {
        return reject(peer, request.worker_id, ErrorCode::malformed_servers_request, e.what());
    }
    if (!answer.error.empty()) return reject(peer, request.worker_id, ErrorCode::other_initial_parameters, answer.error);
    Header h;
    h.type = MessageType::servers;
    h.sequence = request.sequence;
    send_text(peer, h, directory_answer(answer));  // dropped: the asker asks again
}

void Center::reject(const std::string& peer, std::uint32_t worker_id, ErrorCode why, const std::string& detail) {
    ++stats_.rejected[why];
    // Any rejection drops the sender's partly received exchange whole, whichever check failed;
    // of a streamed one, the chunks already applied stay (docs/protocol.md, "Chunks").
    std::uint32_t applied = 0;
    if (Worker* w = membership_.find(peer)) {
        if (w->from_worker) w->from_worker->drop();
        if (w->buffers_from) w->buffers_from->drop();
        applied = std::exchange(w->streamed_chunks, 0u);
    }
    if (!refusals_.answers(why, peer, Clock::now())) return;  // counted, not answered
    const std::string text = std::string(to_string(why)) + ": " + detail;
    if (refusals_.printed())
        std::fprintf(stderr, "%s: rejected a message from worker %u: %s (%s)\n", options_.name.c_str(), worker_id,
                     text.c_str(),
                     applied ? ("the exchange's first " + std::to_string(applied) + " chunks stay applied").c_str()
                             : "x~ unchanged");
    Header h;
    h.type = MessageType::error;
    h.error_code = why;  // what the receiver acts on; the text is for people
    h.worker_id = worker_id;
    h.center_version = updates_.version();
    send_text(peer, h, text);
}

void Center::send_text(const std::string& peer, Header h, const std::string& text) {
    h.dtype = Dtype::utf8;
    h.fingerprint = options_.fingerprint;
    h.element_count = text.size();
    try {
        const auto header = encode(h);
        endpoint_->send(peer, header, text.data(), text.size());
        stats_.bytes_sent += header.size() + text.size();
    } catch (const DeliveryError&) {
        // Gone, or not reading (the center's sends never wait): counted, never retried.
        ++stats_.replies_dropped;
    }
}

void Center::lose_disconnected(bool waited_on_only) {
    Header h;
    h.type = MessageType::heartbeat;
    h.fingerprint = options_.fingerprint;
    std::vector<Worker*> closed;
    for (const auto& w : membership_.workers()) {
        if (w->state != Worker::State::active || (waited_on_only && w->in_round)) continue;
        h.worker_id = w->id;
        h.center_version = updates_.version();
        try {
            const auto header = encode(h);
            endpoint_->send(w->peer, header, nullptr, 0);  // a heartbeat answer: harmless to a live worker
            stats_.bytes_sent += header.size();
        } catch (const DeliveryError& e) {
            if (e.gone()) closed.push_back(w.get());
            else ++stats_.replies_dropped;
        }
    }
    // After the loop: losing a worker may close the round, and with it change the workers.
    for (Worker* w : closed)
        lose(*w, waited_on_only ? "its connection closed while a synchronous round waited on it"
                                : "its connection is closed, and a new worker asks for a place");
}

void Center::probe_round(Clock::time_point now) {
    const auto opened = rounds_.opened();
    const auto every = std::chrono::milliseconds(kRoundProbeMs);
    if (!opened || now - *opened < every || now - round_probed_ < every) return;
    round_probed_ = now;
    lose_disconnected(/*waited_on_only=*/true);
}

void Center::check_liveness(Clock::time_point now) {
    membership_.forgive_own_stall(now);
    // One at a time: losing a worker may close the round that the next check reads.
    while (const auto silent = membership_.next_silent(now, rounds_.opened())) lose(*silent->worker, silent->why);
}

void Center::lose(Worker& w, const std::string& why) {
    const Membership::Loss loss = membership_.lose(w, why);
    if (loss == Membership::Loss::none) return;
    updates_.leave(w.id);
    if (loss == Membership::Loss::dropped) return;
    // Peers lost before their first exchange trained nothing that waiting would bring back.
    if (stats_.live_workers() == 0 && membership_.awaits_lost()) end_.all_silent(Clock::now());
    if (rounds_.open()) maybe_close_round(false);
}

}  // namespace tether
