#include "worker/server_sessions.hpp"

#include <cstring>
#include <stdexcept>

namespace tether {

ServerSessions::ServerSessions(std::vector<ServerLink> links, const SessionOptions& options, std::size_t num_parameters)
    : num_parameters_(num_parameters) {
    if (links.empty()) throw std::invalid_argument("a worker needs the address of at least one server");
    if (links.size() > num_parameters)
        throw std::invalid_argument(std::to_string(links.size()) + " servers for " + std::to_string(num_parameters) +
                                    " parameters: each server needs at least one (cluster.servers)");
    for (std::size_t k = 0; k < links.size(); ++k) {
        SessionOptions o = options;
        o.fingerprint = links[k].fingerprint;
        o.agreed_settings = links[k].agreed_settings;
        o.server_address = links[k].address;
        o.buffer_count = k == 0 ? options.buffer_count : 0;
        o.token_follows_welcome = k == 0 && links.size() > 1;
        o.successor = std::move(links[k].successor);
        o.keep_pulled = links[k].keep_pulled;
        ranges_.push_back(server_range(num_parameters, links.size(), k));
        every_server_.push_back(k);
        addresses_.push_back(links[k].address);
        sessions_.push_back(std::make_unique<ServerSession>(std::move(links[k].channel), o, ranges_.back().count));
    }
    if (sessions_.size() > 1)
        for (std::size_t k = 0; k < sessions_.size(); ++k)
            sessions_[k]->while_waiting = [this, k] {
                for (std::size_t j = 0; j < sessions_.size(); ++j)
                    if (j != k) sessions_[j]->heartbeat_if_idle();
            };
}

Welcome ServerSessions::join() {
    Welcome all = sessions_[0]->join();
    if (sessions_.size() == 1) return all;
    std::vector<float> center(num_parameters_);
    std::memcpy(center.data(), all.center.data(), ranges_[0].count * sizeof(float));
    for (std::size_t k = 1; k < sessions_.size(); ++k) {
        sessions_[k]->set_worker_id(all.worker_id);
        sessions_[k]->set_token(all.token);
        const Welcome part = sessions_[k]->join();
        if (part.worker_id != all.worker_id)
            throw std::runtime_error("server " + std::to_string(k) + " at " + addresses_[k] + " welcomed this worker as id " +
                                     std::to_string(part.worker_id) + ", but server 0 gave it id " +
                                     std::to_string(all.worker_id) + "; the servers do not agree");
        std::memcpy(center.data() + ranges_[k].first, part.center.data(), ranges_[k].count * sizeof(float));
    }
    all.center = std::move(center);
    return all;
}

void ServerSessions::send(std::size_t k, const Payload& payload, const WorkerProgress& at, const Payload* buffers) {
    sessions_[k]->send_exchange(payload.slice(ranges_[k].first * sizeof(float), ranges_[k].count * sizeof(float)), at,
                                k == 0 ? buffers : nullptr);
}

ExchangeOutcome ServerSessions::exchange(const Payload& payload, const WorkerProgress& at, const Payload* buffers) {
    if (sessions_.size() > 1) return exchange_some(every_server_, payload, at, buffers);
    send(0, payload, at, buffers);
    ExchangeOutcome out;
    out.reply = receive(0, out);  // one server: its frame as it came, no copy
    return out;
}

ExchangeOutcome ServerSessions::exchange_some(const std::vector<std::size_t>& servers, const Payload& payload,
                                              const WorkerProgress& at, const Payload* buffers) {
    // All sent first: the servers work in parallel, and (several fragments due at once, a
    // worker's finish()) waiting on one server's round before sending to the next could wait on
    // a worker that waits on this one at another server.
    for (std::size_t k : servers) send(k, payload, at, buffers);
    ExchangeOutcome out;
    // The ranges are copied into one vector for the rule (which may keep it as its x_pull).
    out.reply = replies_.next(num_parameters_ * sizeof(float));
    for (std::size_t k : servers) {
        const Payload part = receive(k, out);
        std::memcpy(out.reply.floats() + ranges_[k].first, part.data(), ranges_[k].count * sizeof(float));
    }
    return out;
}

Payload ServerSessions::receive(std::size_t k, ExchangeOutcome& out) {
    const std::uint32_t id = sessions_[k]->worker_id();
    ServerReply r = sessions_[k]->receive_reply();
    if (r.rejoined) {
        if (sessions_.size() > 1 && r.rejoined->worker_id != id)
            throw std::runtime_error("server " + std::to_string(k) + " at " + addresses_[k] + " took this worker back as id " +
                                     std::to_string(r.rejoined->worker_id) + ", not its id " + std::to_string(id) +
                                     ": with several servers a worker keeps its id (another worker holds it now)");
        out.rejoined.push_back(ranges_[k]);
        if (k == 0) out.buffers = std::move(r.rejoined->buffers);
        // Server 0 welcomed it again (it restarted): the others ask for its new token from now on.
        if (k == 0)
            for (std::size_t j = 1; j < sessions_.size(); ++j) sessions_[j]->set_token(r.rejoined->token);
        r.version = r.rejoined->version;
        r.reply = Payload::allocate(ranges_[k].count * sizeof(float));
        std::memcpy(r.reply.data(), r.rejoined->center.data(), r.reply.size());
    }
    if (k == 0) {
        out.version = r.version;
        out.window = r.window;
    }
    out.budget_met = out.budget_met || r.budget_met;
    return r.reply;
}

void ServerSessions::heartbeat_if_idle() {
    for (auto& s : sessions_) s->heartbeat_if_idle();
}

void ServerSessions::bye() {
    for (auto& s : sessions_) s->bye();
}

void ServerSessions::close() {
    for (auto& s : sessions_) s->close();
}

void ServerSessions::set_progress(const WorkerProgress& p) {
    for (auto& s : sessions_) s->set_progress(p);
}

std::uint64_t ServerSessions::bytes_sent() const {
    std::uint64_t total = 0;
    for (const auto& s : sessions_) total += s->bytes_sent();
    return total;
}

std::uint64_t ServerSessions::bytes_received() const {
    std::uint64_t total = 0;
    for (const auto& s : sessions_) total += s->bytes_received();
    return total;
}

std::size_t ServerSessions::rejoins() const {
    std::size_t total = 0;
    for (const auto& s : sessions_) total += s->rejoins();
    return total;
}

}  // namespace tether
