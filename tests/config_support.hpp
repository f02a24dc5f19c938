// Config helpers shared by the config and strategy tests.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "config/config.hpp"
#include "strategy/configured_strategy.hpp"
#include "util/errors.hpp"

namespace tether::testing {

// The message of the ConfigError that parsing `document` throws ("" when it throws none).
inline std::string parse_error(const nlohmann::json& document) {
    try {
        parse_config(document);
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "";
}

// The strategy a config document builds.
inline std::shared_ptr<const ConfiguredStrategy> strategy(const nlohmann::json& document) {
    return parse_config(document).cluster.strategy;
}

}  // namespace tether::testing
