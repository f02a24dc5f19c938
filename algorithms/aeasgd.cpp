#include "algorithms/aeasgd.hpp"

#include "algorithms/elastic.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_aeasgd(StrategyOptions& options, const StrategyContext& context) {
    const int window = options.communication_window(10);
    return std::make_shared<AsyncElasticStrategy>(window, read_moving_rate(options, context));
}

}  // namespace tether
