#include "algorithms/eamsgd.hpp"

#include "algorithms/elastic.hpp"
#include "util/errors.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_eamsgd(JsonReader& block, const RunConfig& config) {
    const CommonStrategyOptions common = read_common_options(block, 10);
    const double alpha = read_moving_rate(block, int(config.cluster.workers));
    if (config.training.optimizer.name != "nesterov")
        throw ConfigError("strategy.name: \"eamsgd\" runs Nesterov momentum locally, but training.optimizer.name is \"" +
                          config.training.optimizer.name +
                          "\"; set it to \"nesterov\" (training.optimizer.momentum is the paper's delta), or use "
                          "\"aeasgd\" with any local optimizer");
    return std::make_shared<AsyncElasticStrategy>("eamsgd", common.communication_window, alpha);
}

}  // namespace tether
