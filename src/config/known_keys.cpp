#include "config/known_keys.hpp"

#include <set>

#include "strategy/registry.hpp"

namespace tether {

std::vector<KeyInfo> known_config_keys() {
    std::vector<KeyInfo> all;
    std::set<std::string> seen;
    const auto merge = [&](const nlohmann::json& document) {
        std::vector<KeyInfo> keys;
        parse_config(document, &keys);
        // A key first seen here goes after its siblings (strategy.gamma beside strategy.name).
        for (auto& k : keys) {
            if (!seen.insert(k.path).second) continue;
            const std::string parent = k.path.substr(0, k.path.rfind('.') + 1);
            auto after = all.end();
            for (auto it = all.begin(); it != all.end(); ++it)
                if (it->path.rfind(parent, 0) == 0) after = it + 1;
            all.insert(after, k);
        }
    };
    // Each strategy reads its own keys, so parse one config per strategy and merge. Nesterov is
    // a local optimizer every built-in runs with (eamsgd needs it); defaults are recorded as such.
    for (const auto& name : strategy_names())
        merge({{"strategy", {{"name", name}}},
               {"cluster", {{"workers", name == "sequential" ? 1 : 2}}},
               {"training", {{"optimizer", {{"name", "nesterov"}}}}}});
    // So does each learning-rate schedule (a step schedule needs one of its two decay keys).
    for (const nlohmann::json& schedule : {nlohmann::json{{"name", "cosine"}}, nlohmann::json{{"name", "step"}, {"every_epochs", 1}}})
        merge({{"training", {{"optimizer", {{"schedule", schedule}}}}}});
    return all;
}

}  // namespace tether
