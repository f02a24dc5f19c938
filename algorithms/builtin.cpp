#include "algorithms/builtin.hpp"

namespace tether {

const std::vector<BuiltinStrategy>& builtin_strategies() {
    static const std::vector<BuiltinStrategy> entries = {
        {"averaging", "synchronous model averaging", make_averaging},
        {"easgd", "synchronous elastic averaging SGD", make_easgd},
        {"aeasgd", "asynchronous elastic averaging SGD", make_aeasgd},
        {"eamsgd", "asynchronous elastic averaging with Nesterov momentum", make_eamsgd},
        {"downpour", "asynchronous accumulated updates (DOWNPOUR)", make_downpour},
        {"adag", "accumulated updates normalized by the window (ADAG / AGN)", make_adag},
        {"dynsgd", "accumulated updates damped by staleness (DynSGD)", make_dynsgd},
        {"adag-staleness", "ADAG with each commit scaled element by element by the drift of x~ since the pull",
         make_adag_staleness},
        {"diloco", "synchronous rounds with an outer Nesterov SGD step on the center (DiLoCo)", make_diloco},
        {"async-diloco", "DiLoCo's outer step on each pseudo-gradient as it arrives: SGD at 1 / N, or (delayed) Nesterov (Liu et al. 2024)",
         make_async_diloco},
    };
    return entries;
}

}  // namespace tether
