#include "center/update_path.hpp"

#include <algorithm>
#include <cstring>

namespace tether {

UpdatePath::UpdatePath(std::unique_ptr<CenterRule> rule, std::vector<float> initial, const UpdateOptions& options,
                       CenterStats& stats)
    : rule_(std::move(rule)), options_(options), stats_(stats) {
    state_.x = std::move(initial);
    // An asynchronous rule answers each range in the frame it came in: that needs float32 replies.
    streams_ = options_.stream_exchanges && rule_->takes_ranges() && !lossy(options_.payload_codec.kind) &&
               (rule_->synchronous() || !lossy(options_.reply_codec.kind));
}

void UpdatePath::join(CenterWorker& w) {
    rule_->on_join(state_, w.id);
    w.pull_version = state_.version;
    const std::size_t n = state_.x.size(), chunk = options_.chunk_elements;
    w.from_worker = std::make_unique<ChunkAssembler>(ChunkFormat{n, chunk, options_.payload_codec, options_.wire_kinds.payload},
                                                     "exchange", "cluster.codec", /*refuse_non_finite=*/true, streams_);
    w.to_worker = std::make_unique<ChunkSender>(ChunkFormat{n, chunk, options_.reply_codec, options_.wire_kinds.reply});
    w.from_worker->reset(state_.x.data());
    w.to_worker->reset(state_.x.data());
}

void UpdatePath::resume(std::vector<float> x, std::uint64_t version) {
    state_.x = std::move(x);
    state_.version = version;
    welcome_ = Payload();
}

const Payload& UpdatePath::welcome_copy() {
    if (welcome_.size() == 0) {
        welcome_ = Payload::allocate(state_.x.size() * sizeof(float));
        std::memcpy(welcome_.data(), state_.x.data(), welcome_.size());
    }
    return welcome_;
}

std::uint64_t UpdatePath::receive(std::uint64_t pull_version) {
    const std::uint64_t staleness = state_.version - std::min(state_.version, pull_version);
    stats_.staleness_sum += double(staleness);
    stats_.staleness_max = std::max(stats_.staleness_max, staleness);
    ++stats_.staleness_count;
    ++stats_.exchanges;
    return staleness;
}

double UpdatePath::apply(const Exchange& exchange, float* reply) {
    const double norm = rule_->apply(state_, exchange, reply);
    welcome_ = Payload();
    if (exchange.last) {
        ++state_.version;
        ++stats_.updates_applied;
    }
    return norm;
}

void UpdatePath::contribute(const Exchange& exchange) {
    if (exchange.last && exchange.pull_version < state_.version) ++stats_.late_reports;
    welcome_ = Payload();  // a rule may move x~ here too
    rule_->contribute(state_, exchange);
}

UpdatePath::Closed UpdatePath::close_round() {
    welcome_ = Payload();  // before the reply is allocated: never both at once
    const Payload reply = round_replies_.next(state_.x.size() * sizeof(float));
    const double norm = rule_->close_round(state_, reply.floats());
    ++state_.version;
    ++stats_.updates_applied;
    ++stats_.rounds;
    return {reply, norm};
}

}  // namespace tether
