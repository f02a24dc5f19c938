#include "algorithms/aeasgd.hpp"

#include "algorithms/elastic.hpp"

namespace tether {

AsyncElasticStrategy::AsyncElasticStrategy(std::string name, int window, double alpha)
    : name_(std::move(name)), window_(window), alpha_(alpha) {}

nlohmann::json AsyncElasticStrategy::describe() const {
    return {{"name", name_}, {"communication_window", window_}, {"moving_rate", alpha_}};
}

std::unique_ptr<WorkerRule> AsyncElasticStrategy::make_worker_rule(const StrategyContext& c) const {
    return std::make_unique<SendParametersWorker>(c.num_parameters, SendParametersWorker::Reply::subtract, 0.f);
}

std::unique_ptr<CenterRule> AsyncElasticStrategy::make_center_rule(const StrategyContext&) const {
    return std::make_unique<ElasticCenter>(float(alpha_));
}

std::shared_ptr<const Strategy> make_aeasgd(JsonReader& block, const RunConfig& config) {
    const CommonStrategyOptions common = read_common_options(block, 10);
    const double alpha = read_moving_rate(block, int(config.cluster.workers));
    return std::make_shared<AsyncElasticStrategy>("aeasgd", common.communication_window, alpha);
}

}  // namespace tether
