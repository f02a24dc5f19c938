#include "algorithms/easgd.hpp"

#include "algorithms/synchronous.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_easgd(StrategyOptions& options, const StrategyContext& context) {
    const int window = options.communication_window(10);
    const double alpha = read_moving_rate(options, context);
    if (alpha * double(context.workers) >= 1.0)
        throw ConfigError(options.path_of("moving_rate") + ": " + std::to_string(alpha) + " with " +
                          std::to_string(context.workers) +
                          " workers gives beta = N alpha >= 1, where synchronous EASGD is unstable; use alpha < 1 / N");
    return std::make_shared<SynchronousStrategy>(SynchronousStrategy::Kind::easgd, window, alpha);
}

}  // namespace tether
