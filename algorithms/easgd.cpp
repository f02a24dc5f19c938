#include "algorithms/easgd.hpp"

#include "algorithms/synchronous.hpp"
#include "util/errors.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_easgd(JsonReader& block, const RunConfig& config) {
    const CommonStrategyOptions common = read_common_options(block, 10);
    const double alpha = read_moving_rate(block, int(config.cluster.workers));
    if (alpha * double(config.cluster.workers) >= 1.0)
        throw ConfigError("strategy.moving_rate: " + std::to_string(alpha) + " with " +
                          std::to_string(config.cluster.workers) +
                          " workers gives beta = N alpha >= 1, where synchronous EASGD is unstable; use alpha < 1 / N");
    return std::make_shared<SynchronousStrategy>(SynchronousStrategy::Kind::easgd, common.communication_window, alpha);
}

}  // namespace tether
