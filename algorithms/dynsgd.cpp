#include "algorithms/dynsgd.hpp"

#include "algorithms/accumulated_update.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_dynsgd(StrategyOptions& options, const StrategyContext&) {
    return make_accumulated_update(AccumulatedUpdateStrategy::Kind::dynsgd, options);
}

}  // namespace tether
