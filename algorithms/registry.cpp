#include "algorithms/registry.hpp"

#include "algorithms/adag.hpp"
#include "algorithms/adag_staleness.hpp"
#include "algorithms/aeasgd.hpp"
#include "algorithms/averaging.hpp"
#include "algorithms/diloco.hpp"
#include "algorithms/downpour.hpp"
#include "algorithms/dynsgd.hpp"
#include "algorithms/eamsgd.hpp"
#include "algorithms/easgd.hpp"
#include "algorithms/sequential.hpp"

namespace tether {

const std::vector<StrategyEntry>& strategy_registry() {
    static const std::vector<StrategyEntry> entries = {
        {"sequential", "one worker, no center: the reference", make_sequential},
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
    };
    return entries;
}

std::vector<std::string> strategy_names() {
    std::vector<std::string> names;
    for (const auto& e : strategy_registry()) names.push_back(e.name);
    return names;
}

std::shared_ptr<const Strategy> make_strategy(JsonReader& block, const RunConfig& config) {
    const std::string name = block.choice("name", "sequential", strategy_names());
    for (const auto& e : strategy_registry())
        if (name == e.name) return e.make(block, config);
    return nullptr;  // unreachable: choice() rejected unknown names
}

}  // namespace tether
