#include "optim/optimizer.hpp"

#include <cmath>
#include <stdexcept>

namespace tether {
namespace {

class Sgd final : public Optimizer {
public:
    Sgd(Backend& b, std::size_t n, float lr) : backend_(b), size_(n), lr_(lr) {}
    void step(float* x, const float* g) override { backend_.sgd_step(x, g, size_, lr_); }

private:
    Backend& backend_;
    std::size_t size_;
    float lr_;
};

class Nesterov final : public Optimizer {
public:
    Nesterov(Backend& b, std::size_t n, float lr, float mu) : backend_(b), size_(n), lr_(lr), mu_(mu), velocity_(b, n) {
        backend_.fill(velocity_.data(), n, 0.f);
    }
    void step(float* x, const float* g) override { backend_.nesterov_step(x, velocity_.data(), g, size_, lr_, mu_); }

private:
    Backend& backend_;
    std::size_t size_;
    float lr_, mu_;
    DeviceBuffer<float> velocity_;
};

class Adam final : public Optimizer {
public:
    Adam(Backend& b, std::size_t n, const OptimizerConfig& c)
        : backend_(b), size_(n), config_(c), m_(b, n), v_(b, n) {
        backend_.fill(m_.data(), n, 0.f);
        backend_.fill(v_.data(), n, 0.f);
    }
    void step(float* x, const float* g) override {
        ++t_;
        const float c1 = float(1.0 - std::pow(config_.beta1, double(t_)));
        const float c2 = float(1.0 - std::pow(config_.beta2, double(t_)));
        backend_.adam_step(x, m_.data(), v_.data(), g, size_, float(config_.learning_rate), float(config_.beta1),
                           float(config_.beta2), float(config_.epsilon), c1, c2);
    }

private:
    Backend& backend_;
    std::size_t size_;
    OptimizerConfig config_;
    DeviceBuffer<float> m_, v_;
    long t_ = 0;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, Backend& backend, std::size_t size) {
    if (c.name == "sgd") return std::make_unique<Sgd>(backend, size, float(c.learning_rate));
    if (c.name == "nesterov") return std::make_unique<Nesterov>(backend, size, float(c.learning_rate), float(c.momentum));
    if (c.name == "adam") return std::make_unique<Adam>(backend, size, c);
    throw std::invalid_argument("training.optimizer.name: unknown optimizer \"" + c.name + "\"");
}

}  // namespace tether
