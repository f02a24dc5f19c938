#include "algorithms/eamsgd.hpp"

#include "algorithms/aeasgd.hpp"

namespace tether {

// The exchange and its options are aeasgd's. That the local optimizer is Nesterov is checked
// where the run's training section is known (config/config.cpp); in the embedding API the
// local optimizer is the user's own.
std::shared_ptr<const Strategy> make_eamsgd(StrategyOptions& options, const StrategyContext& context) {
    return make_aeasgd(options, context);
}

}  // namespace tether
