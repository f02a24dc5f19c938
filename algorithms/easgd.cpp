#include "algorithms/easgd.hpp"

#include "algorithms/synchronous.hpp"
#include "util/errors.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_easgd(JsonReader& block, const RunConfig& config) {
    const CommonStrategyOptions common = read_common_options(block, 10);
    const double alpha = read_moving_rate(block, int(config.cluster.workers));
    // For experiments that look for where synchronous EASGD breaks (docs/strategies.md#easgd).
    const bool allow_unstable = block.boolean("allow_unstable", false);
    const double beta = alpha * double(config.cluster.workers);
    if (beta >= 1.0 && !allow_unstable)
        throw ConfigError("strategy.moving_rate: " + nlohmann::json(alpha).dump() + " with " +
                          std::to_string(config.cluster.workers) + " workers (cluster.workers) gives beta = N alpha = " +
                          nlohmann::json(beta).dump() +
                          " >= 1: each round would put x~ on or past the workers' mean (Zhang et al. 2015 keep beta < 1, "
                          "0.9 in their experiments); use moving_rate < 1 / N, or set strategy.allow_unstable: true to "
                          "run it anyway (docs/strategies.md#easgd)");
    return std::make_shared<SynchronousStrategy>(SynchronousStrategy::Kind::easgd, common.communication_window, alpha);
}

}  // namespace tether
