#include "algorithms/averaging.hpp"

#include "algorithms/synchronous.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_averaging(StrategyOptions& options, const StrategyContext&) {
    return std::make_shared<SynchronousStrategy>(SynchronousStrategy::Kind::averaging, options.communication_window(10), 0.0);
}

}  // namespace tether
