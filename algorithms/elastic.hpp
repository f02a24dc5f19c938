// The halves shared by the elastic-averaging family.
#pragma once

#include "algorithms/strategy.hpp"

namespace tether {

// Sends x_i; the reply is a vector r and the worker sets x_i <- (1 - a) x_i + a b r.
//   aeasgd / eamsgd: r = e (the elastic difference), x_i <- x_i - e      (a = 0, b = -1, additive)
//   easgd:           r = x~_old,  x_i <- x_i - alpha (x_i - x~_old)       (a = alpha, b = 1)
//   averaging:       r = x~_new,  x_i <- x~_new                           (a = 1,     b = 1)
class SendParametersWorker final : public WorkerRule {
public:
    enum class Reply { subtract, pull_towards, replace };
    SendParametersWorker(std::size_t size, Reply reply, float alpha) : size_(size), reply_(reply), alpha_(alpha) {}
    void on_join(Backend& backend, float* x, const float* center_host, std::uint64_t version) override;
    void make_payload(Backend& backend, const float* x, float* payload_host) override;
    void apply_reply(Backend& backend, float* x, const float* reply_host, std::uint64_t version) override;

private:
    std::size_t size_;
    Reply reply_;
    float alpha_;
    DeviceBuffer<float> scratch_;
};

// Asynchronous EASGD center: e = alpha (x_i - x~); x~ <- x~ + e; reply e.
class ElasticCenter final : public CenterRule {
public:
    explicit ElasticCenter(float alpha) : alpha_(alpha) {}
    double apply(CenterState& center, const Exchange& exchange, float* reply) override;

private:
    float alpha_;
};

// aeasgd and eamsgd: the same exchange; eamsgd only changes the local optimizer.
class AsyncElasticStrategy final : public Strategy {
public:
    AsyncElasticStrategy(std::string name, int window, double alpha);
    std::string name() const override { return name_; }
    int communication_window() const override { return window_; }
    nlohmann::json describe() const override;
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const override;
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const override;

private:
    std::string name_;
    int window_;
    double alpha_;
};

}  // namespace tether
