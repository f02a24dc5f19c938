// EAMSGD, elastic averaging with Nesterov momentum (Zhang, Choromanska, LeCun, NIPS 2015,
// Algorithm 2).
//   worker local step:        u <- delta u - eta grad f(x_i + delta u);  x_i <- x_i + u
//   worker, every tau steps:  send x_i;  receive e;  x_i <- x_i - e
//   center, on receipt:       e = alpha (x_i - x~);  x~ <- x~ + e;  reply e
// The exchange, its rules and its options are aeasgd's; the local step is the local optimizer's,
// which must be Nesterov (its momentum is delta): refused below where tether runs the local
// optimizer (a config file), the embedding user's own otherwise.
// Defaults: communication_window 10, moving_rate 0.9 / N.
#include <string>

#include "algorithms/builtin.hpp"

namespace tether {

std::shared_ptr<const Strategy> make_eamsgd(StrategyOptions& options, const StrategyContext& context) {
    if (!context.local_optimizer.empty() && context.local_optimizer != "nesterov")
        throw ConfigError(options.path_of("name") + ": \"eamsgd\" runs Nesterov momentum locally, but "
                          "training.optimizer.name is \"" + context.local_optimizer +
                          "\"; set it to \"nesterov\" (training.optimizer.momentum is the paper's delta), or use "
                          "\"aeasgd\" with any local optimizer");
    return make_aeasgd(options, context);
}

}  // namespace tether
