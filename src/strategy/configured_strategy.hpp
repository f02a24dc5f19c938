// A strategy as its block configured it: the registered name, the Strategy the factory built,
// and its description (every option as resolved), which summaries print and the fingerprint
// hashes. What RunConfig and the embedding API hold. "sequential" is one too, without a
// Strategy: it trains one worker with no center.
#pragma once

#include <nlohmann/json.hpp>

#include <tether/strategy.hpp>

#include <memory>
#include <stdexcept>
#include <string>

namespace tether {

class ConfiguredStrategy final : public Strategy {
public:
    ConfiguredStrategy(std::string name, std::shared_ptr<const Strategy> strategy, nlohmann::json description)
        : name_(std::move(name)), strategy_(std::move(strategy)), description_(std::move(description)) {}

    const std::string& name() const { return name_; }
    // False for "sequential", which trains without a center.
    bool uses_center() const { return strategy_ != nullptr; }
    // The options as resolved, with "name": {"name": "aeasgd", "communication_window": 10, ...}.
    nlohmann::json describe() const { return description_; }

    int communication_window() const override { return strategy_ ? strategy_->communication_window() : 0; }
    WireKinds wire_kinds() const override { return strategy_ ? strategy_->wire_kinds() : WireKinds{}; }
    bool dynamic_windows() const override { return strategy_ && strategy_->dynamic_windows(); }
    std::unique_ptr<ExchangePolicy> make_exchange_policy(const StrategyContext& context) const override {
        return checked().make_exchange_policy(context);
    }
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext& context) const override {
        return checked().make_worker_rule(context);
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext& context) const override {
        return checked().make_center_rule(context);
    }

private:
    const Strategy& checked() const {
        if (!strategy_) throw std::logic_error("strategy \"" + name_ + "\" has no center and no exchange");
        return *strategy_;
    }
    std::string name_;
    std::shared_ptr<const Strategy> strategy_;
    nlohmann::json description_;
};

}  // namespace tether
