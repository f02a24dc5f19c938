// Loads the CUDA backend (libtether-cuda.so) with dlopen on first use, so that libtether and
// the programs linked to it carry no CUDA dependency: a CPU-only user never loads libcudart or
// cuBLAS, and a machine without the CUDA toolkit runs everything but `device: cuda`.
#include <dlfcn.h>
#include <unistd.h>

#include <string>

#include "backend/cuda_backend.hpp"
#include "util/errors.hpp"

namespace tether {
namespace {

struct CudaLibrary {
    void* handle = nullptr;
    std::string error;  // why it did not load: what dlopen/dlsym said, per place tried
    decltype(&tether_cuda_device_count) device_count = nullptr;
    decltype(&tether_cuda_make_backend) make_backend = nullptr;
};

// The directory of the object this code lives in (libtether.so, or the executable that linked
// libtether statically): where the build and `meson install` put libtether-cuda.so.
std::string own_directory() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr) return "";
    const std::string path = info.dli_fname;
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

CudaLibrary open_library() {
    CudaLibrary lib;
    // By name first (RUNPATH $ORIGIN of libtether.so, LD_LIBRARY_PATH, the loader's cache),
    // then next to this object, for an installation whose RUNPATH was stripped.
    const std::string beside = own_directory();
    for (const std::string& candidate : {std::string(TETHER_CUDA_LIBRARY_NAME), beside + TETHER_CUDA_LIBRARY_NAME}) {
        if (candidate == TETHER_CUDA_LIBRARY_NAME && !lib.error.empty() && beside.empty()) break;
        lib.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib.handle) break;
        const char* why = dlerror();
        lib.error += (lib.error.empty() ? "" : "; ") + std::string(why ? why : candidate + ": not found");
    }
    if (!lib.handle) return lib;
    auto version = reinterpret_cast<decltype(&tether_cuda_version)>(dlsym(lib.handle, "tether_cuda_version"));
    lib.device_count = reinterpret_cast<decltype(lib.device_count)>(dlsym(lib.handle, "tether_cuda_device_count"));
    lib.make_backend = reinterpret_cast<decltype(lib.make_backend)>(dlsym(lib.handle, "tether_cuda_make_backend"));
    if (!version || !lib.device_count || !lib.make_backend) {
        lib.error = "it lacks the tether_cuda_* entry points, so it is not a tether CUDA backend";
    } else if (std::string(version()) != TETHER_VERSION) {
        lib.error = std::string("it was built for tether ") + version() + ", this is tether " + TETHER_VERSION +
                    "; install the libtether-cuda.so of the same build";
    } else {
        return lib;
    }
    dlclose(lib.handle);
    lib.handle = nullptr;
    return lib;
}

// Loaded once per process, on the first question about CUDA; never unloaded (backends made
// by it may live until exit).
const CudaLibrary& library() {
    static const CudaLibrary lib = open_library();
    return lib;
}

}  // namespace

bool cuda_built() { return library().handle != nullptr; }

int cuda_device_count() { return cuda_built() ? library().device_count() : 0; }

// `auto` asks this first. A GPU needs the NVIDIA driver: its kernel module (/proc/driver/nvidia),
// its device nodes, or those of WSL2 (/dev/dxg) and of Jetson boards (/dev/nvhost-ctrl). Without
// any of them there is no GPU to count, and loading the CUDA backend to learn that (libcudart and
// cuBLAS mapped) cost every process of a run on a CPU machine that has the toolkit, and a local run
// a fifth of its throughput (measured: experiments/README.md). `cuda` asked for by name still loads
// it, and says what it finds.
bool nvidia_driver_present() {
    for (const char* path : {"/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg", "/dev/nvhost-ctrl"})
        if (::access(path, F_OK) == 0) return true;
    return false;
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
    const CudaLibrary& lib = library();
    if (!lib.handle)
        throw ConfigError("training.device: \"cuda\" was asked for, but the CUDA backend " TETHER_CUDA_LIBRARY_NAME
                          " could not be loaded: " + lib.error +
                          ". Build tether with nvcc on PATH (-Dcuda=enabled) and keep " TETHER_CUDA_LIBRARY_NAME
                          " next to libtether (or on LD_LIBRARY_PATH), or use \"cpu\" / \"auto\"");
    char error[512] = "";
    Backend* backend = lib.make_backend(device, error, sizeof error);
    if (!backend) throw std::runtime_error(std::string("CUDA backend (" TETHER_CUDA_LIBRARY_NAME "): ") + error);
    return std::unique_ptr<Backend>(backend);
}

}  // namespace tether
