#include "cli/plugins.hpp"

#include <cstdlib>
#include <set>
#include <sstream>

#include <tether/strategy.hpp>

#include "util/errors.hpp"

namespace tether::cli {

std::vector<std::string> take_plugin_arguments(std::vector<std::string>& arguments) {
    std::vector<std::string> paths, kept;
    for (std::size_t i = 0; i < arguments.size(); ++i) {
        const std::string& a = arguments[i];
        if (a == "--plugin") {
            if (i + 1 == arguments.size()) throw ConfigError("--plugin: expected the path of a shared library after it");
            paths.push_back(arguments[++i]);
        } else if (a.rfind("--plugin=", 0) == 0) {
            paths.push_back(a.substr(9));
        } else {
            kept.push_back(a);
        }
    }
    arguments = kept;
    return paths;
}

void load_plugins(const std::vector<std::string>& paths) {
    std::vector<std::string> all;
    if (const char* listed = std::getenv("TETHER_PLUGINS")) {
        std::stringstream in(listed);
        for (std::string path; std::getline(in, path, ':');)
            if (!path.empty()) all.push_back(path);
    }
    all.insert(all.end(), paths.begin(), paths.end());
    std::set<std::string> loaded;
    std::string joined;
    for (const auto& path : all) {
        if (!loaded.insert(path).second) continue;
        try {
            load_plugin(path);
        } catch (const ConfigError& e) {
            throw ConfigError(std::string("--plugin ") + e.what());
        }
        joined += (joined.empty() ? "" : ":") + path;
    }
    if (!joined.empty()) ::setenv("TETHER_PLUGINS", joined.c_str(), 1);
}

}  // namespace tether::cli
