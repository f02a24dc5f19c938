// What the strategies whose workers send x_i itself (averaging, easgd, aeasgd, eamsgd, diloco;
// their workers are or derive from SendParametersWorker, <tether/worker_rules.hpp>) share besides
// their worker half: the round's sum of the x_i, and the elastic moving rate.
#pragma once

#include <tether/strategy.hpp>

#include <map>
#include <utility>
#include <vector>

namespace tether {

// The x_i of one synchronous round, summed as their changes from x~ (which stays as it is
// until the round closes): small numbers, whose float sum keeps the precision that a float sum
// of the x_i themselves would lose, in one vector instead of a double's two. Whole or range by
// range as their chunks arrive (CenterRuleBase::takes_ranges): each range is counted, so a
// range some exchanges of the round lack (a worker lost half-way) is the mean of those that
// hold it.
class RoundSum {
public:
    // Adds x_i - x~ over [e.offset, e.offset + e.size). A round's exchanges come all whole or
    // all by the same ranges (one chunk size per run).
    void add(const Exchange& e, const std::vector<float>& x) {
        if (sum_.empty()) sum_.assign(x.size(), 0.f);
        float* sum = sum_.data() + e.offset;
        const float* center = x.data() + e.offset;
        for (std::size_t i = 0; i < e.size; ++i) sum[i] += e.payload[i] - center[i];
        ++counts_[{e.offset, e.size}];
    }
    std::size_t size() const { return sum_.size(); }
    // covered(i, mean of x_i - x~) for each element the round's exchanges hold, gap(i) for the
    // others, in order.
    template <typename Covered, typename Gap>
    void visit(Covered covered, Gap gap) const {
        std::size_t next = 0;
        for (const auto& [range, count] : counts_) {
            for (; next < range.first; ++next) gap(next);
            const double scale = 1.0 / double(count);
            for (std::size_t i = range.first; i < range.first + range.second; ++i) covered(i, double(sum_[i]) * scale);
            next = range.first + range.second;
        }
        for (; next < sum_.size(); ++next) gap(next);
    }
    // Starts the next round.
    void clear() {
        sum_.assign(sum_.size(), 0.f);
        counts_.clear();
    }

private:
    std::vector<float> sum_;
    std::map<std::pair<std::size_t, std::size_t>, std::size_t> counts_;  // (offset, size) -> exchanges holding it
};

// The moving rate alpha of easgd, aeasgd and eamsgd: given (`moving_rate`), or beta / N with
// beta = 0.9 (the EASGD paper's default), recorded as resolved.
inline double read_moving_rate(StrategyOptions& options, const StrategyContext& context) {
    const auto given = options.optional_number("moving_rate", std::nullopt, 0.0, 1.0, true, "0.9 / workers");
    if (given) return *given;
    const double alpha = 0.9 / double(context.workers);
    options.resolve("moving_rate", alpha);
    return alpha;
}

}  // namespace tether
