#include "center/remote_ranges.hpp"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "center/server_tokens.hpp"
#include "protocol/header.hpp"
#include "transport/peer_identity.hpp"

namespace tether {

RemoteRanges::RemoteRanges(Transport& transport, std::vector<RemoteServer> servers, const TransportOptions& options,
                           std::size_t chunk_elements, int timeout_ms, std::shared_ptr<const ServerTokens> tokens,
                           AddressSource addresses)
    : transport_(transport), options_(options), addresses_(std::move(addresses)), servers_(std::move(servers)),
      tokens_(std::move(tokens)), timeout_ms_(timeout_ms) {
    for (const auto& s : servers_)
        answers_.emplace_back(ChunkFormat{s.range.count, chunk_elements}, "snapshot", "", /*refuse_non_finite=*/false);
    answered_.resize(servers_.size());
    if (!addresses_) connect();
}

void RemoteRanges::connect() {
    if (addresses_) {
        const std::vector<std::string> found = addresses_();  // throws when they are not known in time
        if (found.size() != servers_.size())
            throw std::runtime_error("the server directory lists " + std::to_string(found.size()) + " other server(s), not " +
                                     std::to_string(servers_.size()));
        for (std::size_t i = 0; i < found.size(); ++i) servers_[i].address = found[i];
    }
    std::vector<std::unique_ptr<Channel>> channels;  // all or none: a fetch indexes every server's
    for (const auto& s : servers_)
        channels.push_back(transport_.connect(s.address, unique_peer_identity("server-0-snapshots"), options_));
    channels_ = std::move(channels);
}

RemoteRanges::~RemoteRanges() {
    // Confirmations linger (the channel's default) until they are out; anything else may go.
    if (!confirmed_)
        for (auto& c : channels_) c->abandon();
}

void RemoteRanges::fetch(float* x, bool final) {
    if (channels_.empty() && !servers_.empty()) connect();
    ++sequence_;
    const std::string token = final && tokens_ ? tokens_->for_final(sequence_) : std::string();
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        Header h;
        h.type = MessageType::snapshot;
        h.sequence = sequence_;
        h.flags = (final ? kFlagFinal : 0) | (token.empty() ? 0 : kFlagToken);
        h.element_count = token.size();
        h.fingerprint = servers_[i].fingerprint;
        channels_[i]->send(encode(h), token.data(), token.size());
    }
    for (std::size_t i = 0; i < servers_.size(); ++i) receive(i, x, timeout_ms_);
    if (final) confirm(token);
}

void RemoteRanges::confirm(const std::string& token) {
    // Each server waits for this before it leaves: its range was on the link until now.
    for (std::size_t i = 0; i < servers_.size(); ++i) {
        Header h;
        h.type = MessageType::snapshot;
        h.sequence = sequence_;
        h.flags = kFlagFinal | kFlagReceived | (token.empty() ? 0 : kFlagToken);
        h.element_count = token.size();
        h.fingerprint = servers_[i].fingerprint;
        channels_[i]->send(encode(h), token.data(), token.size());
    }
    confirmed_ = true;
}

void RemoteRanges::receive(std::size_t i, float* x, int timeout_ms) {
    const RemoteServer& s = servers_[i];
    const std::string who = "server " + std::to_string(s.index) + " at " + s.address;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    ChunkAssembler& answer = answers_[i];
    answer.drop();  // what an answer given up on left
    Frames frames;
    while (true) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0 || !channels_[i]->receive(frames, int(left)))
            throw RangeSilent(who + " sent no x~ range within " + std::to_string(timeout_ms) +
                                     " ms (cluster.join_timeout_ms); is it running, with the same config?");
        tether::ErrorCode reason = tether::ErrorCode::none;
        const auto h = decode(frames.header.data(), frames.header.size(), reason);
        if (!h) throw std::runtime_error(who + ": malformed answer (" + std::string(to_string(reason)) + ")");
        if (h->type == MessageType::error)
            throw std::runtime_error(who + " refused the snapshot request: " + std::string(frames.payload.begin(), frames.payload.end()));
        if (h->type != MessageType::snapshot || h->sequence != sequence_) continue;  // an answer to a request given up on
        const ChunkAssembler::Result result = answer.add(*h, frames.payload);
        if (result == ChunkAssembler::Result::refused)
            throw std::runtime_error(who + ": inconsistent snapshot chunk: " + to_string(answer.refusal().code) + ": " + answer.refusal().detail);
        if (result == ChunkAssembler::Result::complete) {
            answered_[i] = {h->center_version, h->samples};
            break;
        }
    }
    const Payload range = answer.take();
    std::memcpy(x + s.range.first, range.data(), range.size());
}

}  // namespace tether
