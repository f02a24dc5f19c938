#include "algorithms/averaging.hpp"

#include "algorithms/synchronous.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_averaging(JsonReader& block, const RunConfig&) {
    const CommonStrategyOptions common = read_common_options(block, 10);
    return std::make_shared<SynchronousStrategy>(SynchronousStrategy::Kind::averaging, common.communication_window, 0.0);
}

}  // namespace tether
