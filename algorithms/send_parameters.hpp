// The halves shared by the strategies whose workers send x_i itself (averaging, easgd, aeasgd,
// eamsgd, diloco): the worker, the round's sum of the x_i, and the elastic moving rate.
#pragma once

#include <tether/strategy.hpp>

#include <vector>

namespace tether {

// Sends x_i and takes the reply as its new x_i (averaging, diloco). A rule that does more with
// the reply derives from it and overrides apply_reply, reading the reply through on_device().
class SendParametersWorker : public WorkerRule {
public:
    explicit SendParametersWorker(std::size_t size) : size_(size) {}
    void on_join(VectorOps& ops, float* x, const float* center_host) override;
    void make_payload(VectorOps& ops, const float* x, float* payload_host) override;
    void apply_reply(VectorOps& ops, float* x, const float* reply_host) override;

protected:
    std::size_t size() const { return size_; }
    // The reply in the worker's memory: host memory reads it where it arrived, a GPU needs it
    // uploaded first.
    const float* on_device(VectorOps& ops, const float* reply_host);

private:
    std::size_t size_;
    DeviceBuffer<float> scratch_;
};

// The x_i of one synchronous round, summed in double: a sum of many float vectors keeps its
// precision.
class RoundSum {
public:
    void add(const Exchange& e, std::size_t size) {
        if (sum_.empty()) sum_.assign(size, 0.0);
        for (std::size_t i = 0; i < e.size; ++i) sum_[i] += e.payload[i];
        ++count_;
    }
    std::size_t size() const { return sum_.size(); }
    double mean(std::size_t i) const { return sum_[i] / double(count_); }
    // Starts the next round.
    void clear() {
        sum_.assign(sum_.size(), 0.0);
        count_ = 0;
    }

private:
    std::vector<double> sum_;
    std::size_t count_ = 0;
};

// The moving rate alpha of easgd, aeasgd and eamsgd: given (`moving_rate`), or beta / N with
// beta = 0.9 (the EASGD paper's default), recorded as resolved.
double read_moving_rate(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
