#include "algorithms/easgd.hpp"

#include "algorithms/synchronous.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_easgd(StrategyOptions& options, const StrategyContext& context) {
    const int window = options.communication_window(10);
    const double alpha = read_moving_rate(options, context);
    // For experiments that look for where synchronous EASGD breaks (docs/strategies.md#easgd).
    const bool allow_unstable = options.boolean("allow_unstable", false);
    const double beta = alpha * double(context.workers);
    if (beta >= 1.0 && !allow_unstable)
        throw ConfigError(options.path_of("moving_rate") + ": " + std::to_string(alpha) + " with " +
                          std::to_string(context.workers) + " workers (cluster.workers) gives beta = N alpha = " +
                          std::to_string(beta) +
                          " >= 1: each round would put x~ on or past the workers' mean (Zhang et al. 2015 keep beta < 1, "
                          "0.9 in their experiments); use moving_rate < 1 / N, or set " + options.path_of("allow_unstable") +
                          ": true to run it anyway (docs/strategies.md#easgd)");
    return std::make_shared<SynchronousStrategy>(SynchronousStrategy::Kind::easgd, window, alpha);
}

}  // namespace tether
