#include "algorithms/downpour.hpp"

#include "algorithms/accumulated_update.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_downpour(JsonReader& block, const RunConfig&) {
    return make_accumulated_update(AccumulatedUpdateStrategy::Kind::downpour, block);
}

}  // namespace tether
