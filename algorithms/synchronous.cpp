#include "algorithms/synchronous.hpp"

#include <cmath>

namespace tether {
namespace {

// x~ <- mean of the x_i of the round; reply x~.
class AveragingCenter final : public SynchronousCenterRule {
public:
    void contribute(CenterState& center, const Exchange& e) override {
        if (sum_.empty()) sum_.assign(center.x.size(), 0.0);
        for (std::size_t i = 0; i < e.size; ++i) sum_[i] += e.payload[i];
        ++count_;
    }
    double close_round(CenterState& center, float* reply) override {
        double moved = 0;
        for (std::size_t i = 0; i < sum_.size(); ++i) {
            const float mean = float(sum_[i] / count_);
            moved += double(mean - center.x[i]) * (mean - center.x[i]);
            center.x[i] = mean;
            reply[i] = mean;
        }
        sum_.assign(sum_.size(), 0.0);
        count_ = 0;
        return std::sqrt(moved);
    }

private:
    std::vector<double> sum_;  // double: a sum of many float vectors keeps its precision
    std::size_t count_ = 0;
};

// x~ <- x~ + alpha sum_i (x_i - x~_old); reply x~_old.
class EasgdCenter final : public SynchronousCenterRule {
public:
    explicit EasgdCenter(float alpha) : alpha_(alpha) {}
    void contribute(CenterState& center, const Exchange& e) override {
        if (pull_.empty()) pull_.assign(center.x.size(), 0.0);
        for (std::size_t i = 0; i < e.size; ++i) pull_[i] += double(e.payload[i]) - center.x[i];
    }
    double close_round(CenterState& center, float* reply) override {
        double moved = 0;
        for (std::size_t i = 0; i < pull_.size(); ++i) {
            const float step = float(alpha_ * pull_[i]);
            reply[i] = center.x[i];
            center.x[i] += step;
            moved += double(step) * step;
        }
        pull_.assign(pull_.size(), 0.0);
        return std::sqrt(moved);
    }

private:
    float alpha_;
    std::vector<double> pull_;
};

}  // namespace

std::unique_ptr<WorkerRule> SynchronousStrategy::make_worker_rule(const StrategyContext& c) const {
    if (kind_ == Kind::averaging)
        return std::make_unique<SendParametersWorker>(c.num_parameters, SendParametersWorker::Reply::replace, 1.f);
    return std::make_unique<SendParametersWorker>(c.num_parameters, SendParametersWorker::Reply::pull_towards,
                                                  float(alpha_));
}

std::unique_ptr<CenterRule> SynchronousStrategy::make_center_rule(const StrategyContext&) const {
    if (kind_ == Kind::averaging) return center_rule<AveragingCenter>();
    return center_rule<EasgdCenter>(float(alpha_));
}

}  // namespace tether
