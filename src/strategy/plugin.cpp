// tether::load_plugin (<tether/strategy.hpp>): a shared library of strategies, loaded into the
// process that runs tether, whatever loaded tether itself.
#include <dlfcn.h>

#include <tether/strategy.hpp>

#include "util/errors.hpp"

namespace tether {

void load_plugin(const std::string& path) {
    // The plugin finds tether::register_strategy in the code that loads it: the `tether`
    // executable exports it (export_dynamic). An object that was itself loaded RTLD_LOCAL (Python
    // loads its extension modules so, and the module holds tether) keeps its symbols from the
    // libraries loaded after it: make it global first. The main program is global already, and
    // RTLD_NOLOAD never loads anything new.
    Dl_info self{};
    if (::dladdr(reinterpret_cast<void*>(&register_strategy), &self) && self.dli_fname)
        ::dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    // RTLD_NOW: a plugin that needs a symbol tether does not export fails here, by name.
    void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) throw ConfigError(path + ": cannot be loaded: " + ::dlerror());
    using Register = void (*)();
    auto entry = reinterpret_cast<Register>(::dlsym(library, "tether_register_strategies"));
    if (!entry)
        throw ConfigError(path + ": it defines no tether_register_strategies(); a plugin defines extern \"C\" void "
                          "tether_register_strategies() calling tether::register_strategy");
    try {
        entry();
    } catch (const std::exception& e) {
        throw ConfigError(path + ": registering its strategies failed: " + e.what());
    }
    // Never dlclose()d: its strategies live in the registry until the process ends.
}

}  // namespace tether
