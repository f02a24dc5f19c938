#include "algorithms/adag.hpp"

#include "algorithms/accumulated_update.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_adag(JsonReader& block, const RunConfig&) {
    return make_accumulated_update(AccumulatedUpdateStrategy::Kind::adag, block);
}

}  // namespace tether
