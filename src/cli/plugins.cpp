#include "cli/plugins.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <set>
#include <sstream>

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

namespace {

void load_plugin(const std::string& path) {
    // RTLD_NOW: a plugin that needs a symbol tether does not export fails here, by name.
    void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) throw ConfigError("--plugin " + path + ": cannot be loaded: " + ::dlerror());
    using Register = void (*)();
    auto entry = reinterpret_cast<Register>(::dlsym(library, "tether_register_strategies"));
    if (!entry)
        throw ConfigError("--plugin " + path + ": it defines no tether_register_strategies(); a plugin defines "
                          "extern \"C\" void tether_register_strategies() calling tether::register_strategy");
    try {
        entry();
    } catch (const std::exception& e) {
        throw ConfigError("--plugin " + path + ": registering its strategies failed: " + e.what());
    }
    // Never dlclose()d: its strategies live in the registry until the process ends.
}

}  // namespace

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
        load_plugin(path);
        joined += (joined.empty() ? "" : ":") + path;
    }
    if (!joined.empty()) ::setenv("TETHER_PLUGINS", joined.c_str(), 1);
}

}  // namespace tether::cli
