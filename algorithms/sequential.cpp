#include "algorithms/sequential.hpp"

#include <stdexcept>

#include "util/errors.hpp"

namespace tether {
namespace {

class Sequential final : public Strategy {
public:
    std::string name() const override { return "sequential"; }
    int communication_window() const override { return 0; }
    bool uses_center() const override { return false; }
    nlohmann::json describe() const override { return {{"name", "sequential"}}; }
    std::unique_ptr<WorkerRule> make_worker_rule(const StrategyContext&) const override {
        throw std::logic_error("sequential training has no worker rule");
    }
    std::unique_ptr<CenterRule> make_center_rule(const StrategyContext&) const override {
        throw std::logic_error("sequential training has no center");
    }
};

}  // namespace

std::shared_ptr<const Strategy> make_sequential(JsonReader&, const RunConfig& config) {
    if (config.cluster.workers != 1)
        throw ConfigError("cluster.workers: " + std::to_string(config.cluster.workers) +
                          " workers with strategy.name \"sequential\"; sequential training uses exactly 1 worker "
                          "(pick a distributed strategy such as \"adag\" or \"aeasgd\" for more)");
    return std::make_shared<Sequential>();
}

}  // namespace tether
