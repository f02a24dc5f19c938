// Asking a server for its agreed settings before joining (a `settings` request, which needs no
// fingerprint): a worker that was given no strategy takes the center's, so that forgetting
// strategy= cannot start a worker with another rule. docs/protocol.md, "Message types".
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "transport/transport.hpp"

namespace tether {

// The agreed settings (cluster/agreed_settings.hpp) of the server at `address`, asked over
// `channel` and waited for up to `timeout_ms`. Throws std::runtime_error naming the address
// when no answer comes or the answer is not the settings.
nlohmann::json ask_agreed_settings(Channel& channel, const std::string& address, int timeout_ms);

}  // namespace tether
