// The halves shared by the elastic-averaging family.
#pragma once

#include <tether/strategy.hpp>

#include <string>

namespace tether {

// Sends x_i; the reply is a vector r and the worker sets x_i <- (1 - a) x_i + a b r.
//   aeasgd / eamsgd: r = e (the elastic difference), x_i <- x_i - e      (a = 0, b = -1, additive)
//   easgd:           r = x~_old,  x_i <- x_i - alpha (x_i - x~_old)       (a = alpha, b = 1)
//   averaging:       r = x~_new,  x_i <- x~_new                           (a = 1,     b = 1)
class SendParametersWorker final : public WorkerRule {
public:
    enum class Reply { subtract, pull_towards, replace };
    SendParametersWorker(std::size_t size, Reply reply, float alpha) : size_(size), reply_(reply), alpha_(alpha) {}

protected:
    void join(VectorOps& ops, float* x, const float* center_host) override;
    void write_payload(VectorOps& ops, const float* x, float* payload_host) override;
    void apply(VectorOps& ops, float* x, const float* reply_host) override;

private:
    std::size_t size_;
    Reply reply_;
    float alpha_;
    DeviceBuffer<float> scratch_;
};

// Asynchronous EASGD center: e = alpha (x_i - x~); x~ <- x~ + e; reply e.
class ElasticCenter final : public AsynchronousCenterRule {
public:
    explicit ElasticCenter(float alpha) : alpha_(alpha) {}
    double apply(CenterState& center, const Exchange& exchange, float* reply) override;

private:
    float alpha_;
};

// aeasgd and eamsgd: the same exchange; eamsgd only changes the local optimizer (a check of
// the run's training section, made by the config layer).
class AsyncElasticStrategy final : public Strategy {
public:
    AsyncElasticStrategy(int window, double alpha) : window_(window), alpha_(alpha) {}
    int communication_window() const override { return window_; }
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const override;
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const override;
    // The worker sends x_i; the center answers the elastic difference e, which x_i subtracts.
    WireKinds wire_kinds() const override { return {WireVector::state, WireVector::update}; }

private:
    int window_;
    double alpha_;
};

// The moving rate alpha: given (`moving_rate`), or beta / N with beta = 0.9 (the EASGD
// paper's default), recorded as resolved.
double read_moving_rate(StrategyOptions& options, const StrategyContext& context);

}  // namespace tether
