#include "optim/optimizer.hpp"

#include <cmath>
#include <stdexcept>

namespace tether {
namespace {

class Sgd final : public Optimizer {
public:
    Sgd(Backend& b, std::size_t n, float lr) : Optimizer(n), backend_(b), lr_(lr) {}
    void update(float* x, const float* g, std::size_t begin, std::size_t end) override {
        backend_.sgd_step(x + begin, g + begin, end - begin, lr_ * learning_rate_scale_);
    }

private:
    Backend& backend_;
    float lr_;
};

class Nesterov final : public Optimizer {
public:
    Nesterov(Backend& b, std::size_t n, float lr, float mu) : Optimizer(n), backend_(b), lr_(lr), mu_(mu), velocity_(b, n) {
        backend_.fill(velocity_.data(), n, 0.f);
    }
    void update(float* x, const float* g, std::size_t begin, std::size_t end) override {
        backend_.nesterov_step(x + begin, velocity_.data() + begin, g + begin, end - begin, lr_ * learning_rate_scale_, mu_);
    }

private:
    Backend& backend_;
    float lr_, mu_;
    DeviceBuffer<float> velocity_;
};

class Adam final : public Optimizer {
public:
    Adam(Backend& b, std::size_t n, const OptimizerConfig& c) : Optimizer(n), backend_(b), config_(c), m_(b, n), v_(b, n) {
        backend_.fill(m_.data(), n, 0.f);
        backend_.fill(v_.data(), n, 0.f);
    }
    void begin_step() override {
        ++t_;
        c1_ = float(1.0 - std::pow(config_.beta1, double(t_)));
        c2_ = float(1.0 - std::pow(config_.beta2, double(t_)));
    }
    void update(float* x, const float* g, std::size_t begin, std::size_t end) override {
        backend_.adam_step(x + begin, m_.data() + begin, v_.data() + begin, g + begin, end - begin,
                           float(config_.learning_rate) * learning_rate_scale_, float(config_.beta1), float(config_.beta2),
                           float(config_.epsilon), c1_, c2_);
    }

private:
    Backend& backend_;
    OptimizerConfig config_;
    DeviceBuffer<float> m_, v_;
    long t_ = 0;
    float c1_ = 1, c2_ = 1;  // this step's bias corrections
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, Backend& backend, std::size_t size) {
    if (c.name == "sgd") return std::make_unique<Sgd>(backend, size, float(c.learning_rate));
    if (c.name == "nesterov") return std::make_unique<Nesterov>(backend, size, float(c.learning_rate), float(c.momentum));
    if (c.name == "adam") return std::make_unique<Adam>(backend, size, c);
    throw std::invalid_argument("training.optimizer.name: unknown optimizer \"" + c.name + "\"");
}

}  // namespace tether
