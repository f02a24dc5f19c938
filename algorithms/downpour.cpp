#include "algorithms/downpour.hpp"

#include "algorithms/accumulated_update.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_downpour(StrategyOptions& options, const StrategyContext&) {
    return make_accumulated_update(AccumulatedUpdateStrategy::Kind::downpour, options);
}

}  // namespace tether
