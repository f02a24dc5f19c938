// Strategies from outside tether for the `tether` command: shared libraries named by
// `--plugin PATH` (repeatable, anywhere among a command's arguments) or by TETHER_PLUGINS
// (PATH:PATH...), loaded before any config is read. A plugin is built against
// <tether/strategy.hpp> alone, links nothing of tether (the `tether` executable exports its
// symbols to it) and defines
//     extern "C" void tether_register_strategies();
// which calls tether::register_strategy for each of its strategies. docs/strategies.md.
#pragma once

#include <string>
#include <vector>

namespace tether::cli {

// Removes every `--plugin PATH` and `--plugin=PATH` from `arguments` and returns the paths.
std::vector<std::string> take_plugin_arguments(std::vector<std::string>& arguments);

// Loads TETHER_PLUGINS, then `paths`, and sets TETHER_PLUGINS to all of them, so that the
// processes this one starts (local-mode workers) load the same. Throws ConfigError naming the
// library and why it cannot be used.
void load_plugins(const std::vector<std::string>& paths);

}  // namespace tether::cli
