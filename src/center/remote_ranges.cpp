#include "center/remote_ranges.hpp"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "codec/wire_vector.hpp"
#include "protocol/header.hpp"
#include "transport/peer_identity.hpp"

namespace tether {

RemoteRanges::RemoteRanges(Transport& transport, std::vector<RemoteServer> servers, const TransportOptions& options,
                           std::size_t shard_elements, int timeout_ms)
    : servers_(std::move(servers)), shard_elements_(shard_elements), timeout_ms_(timeout_ms) {
    for (const auto& s : servers_)
        channels_.push_back(transport.connect(s.address, unique_peer_identity("server-0-snapshots"), options));
}

RemoteRanges::~RemoteRanges() {
    for (auto& c : channels_) c->abandon();
}

void RemoteRanges::fetch(float* x, bool final) {
    ++sequence_;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        Header h;
        h.type = MessageType::snapshot;
        h.sequence = sequence_;
        h.flags = final ? kFlagFinal : 0;
        h.fingerprint = servers_[i].fingerprint;
        channels_[i]->send(encode(h), nullptr, 0);
    }
    for (std::size_t i = 0; i < servers_.size(); ++i) receive(i, x, timeout_ms_);
}

void RemoteRanges::receive(std::size_t i, float* x, int timeout_ms) {
    const RemoteServer& s = servers_[i];
    const std::string who = "server " + std::to_string(s.index) + " at " + s.address;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    const std::uint32_t shards = std::uint32_t(frame_count(s.range.count, shard_elements_));
    std::uint32_t next = 0;
    Frames frames;
    while (next < shards) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0 || !channels_[i]->receive(frames, int(left)))
            throw std::runtime_error(who + " sent no x~ range within " + std::to_string(timeout_ms) +
                                     " ms (cluster.join_timeout_ms); is it running, with the same config?");
        std::string reason;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (!h) throw std::runtime_error(who + ": malformed answer (" + reason + ")");
        if (h->type == MessageType::error)
            throw std::runtime_error(who + " refused the snapshot request: " + std::string(frames.payload.begin(), frames.payload.end()));
        if (h->type != MessageType::snapshot || h->sequence != sequence_) continue;  // an answer to a request given up on
        const FrameRange r = frame_range(s.range.count, shard_elements_, h->shard_id);
        if (h->shard_id != next || h->shard_count != shards || h->dtype != Dtype::float32 || h->element_count != r.count ||
            frames.payload.size() != r.count * sizeof(float))
            throw std::runtime_error(who + ": inconsistent snapshot shard " + std::to_string(h->shard_id));
        std::memcpy(x + s.range.first + r.first, frames.payload.data(), frames.payload.size());
        ++next;
    }
}

}  // namespace tether
