// Where a run came from, for summary.json: which tether (version and the commit it was built
// from), on which host, started how and when. A result without these cannot be traced back.
#pragma once

#include <nlohmann/json.hpp>

namespace tether {

// tether_version, commit, host, command_line, start_time (UTC, ISO 8601), pid; taken now.
nlohmann::json current_provenance();

}  // namespace tether
