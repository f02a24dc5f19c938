#include "config/known_keys.hpp"

#include <set>

#include "strategy/registry.hpp"

namespace tether {

std::vector<KeyInfo> known_config_keys() {
    std::vector<KeyInfo> all;
    std::set<std::string> seen;
    // Each strategy reads its own keys, so parse one config per strategy and merge. Nesterov is
    // a local optimizer every built-in runs with (eamsgd needs it); defaults are recorded as such.
    for (const auto& name : strategy_names()) {
        const nlohmann::json document = {{"strategy", {{"name", name}}},
                                          {"cluster", {{"workers", name == "sequential" ? 1 : 2}}},
                                          {"training", {{"optimizer", {{"name", "nesterov"}}}}}};
        std::vector<KeyInfo> keys;
        parse_config(document, &keys);
        for (auto& k : keys) {
            if (seen.insert(k.path).second) all.push_back(k);
        }
    }
    return all;
}

}  // namespace tether
