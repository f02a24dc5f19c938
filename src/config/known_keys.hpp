#pragma once

#include <vector>

#include "config/config.hpp"

namespace tether {

// Every key the config parser accepts, with type, default and what is allowed (strategy keys
// from every registered strategy). Drives `tether config-keys` and the docs test.
std::vector<KeyInfo> known_config_keys();

}  // namespace tether
