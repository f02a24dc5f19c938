#include "algorithms/dynsgd.hpp"

#include "algorithms/accumulated_update.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_dynsgd(JsonReader& block, const RunConfig&) {
    return make_accumulated_update(AccumulatedUpdateStrategy::Kind::dynsgd, block);
}

}  // namespace tether
