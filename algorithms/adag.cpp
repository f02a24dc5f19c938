#include "algorithms/adag.hpp"

#include "algorithms/accumulated_update.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_adag(StrategyOptions& options, const StrategyContext&) {
    return make_accumulated_update(AccumulatedUpdateStrategy::Kind::adag, options);
}

}  // namespace tether
