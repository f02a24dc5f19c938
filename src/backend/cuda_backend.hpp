// The seam between libtether (CPU only, no CUDA symbols) and libtether-cuda.so, the CUDA
// backend built by nvcc. libtether loads libtether-cuda.so with dlopen the first time GPU
// memory or `device: cuda` is asked for (backend/cuda_loader.cpp), so a program that never
// asks for the GPU neither links nor loads libcudart and cuBLAS.
#pragma once

#include <cstddef>
#include <memory>

#include "backend/backend.hpp"

namespace tether {

// Loads libtether-cuda.so on first use. Throws ConfigError naming the library and dlerror()'s
// reason when it cannot be loaded, or when no GPU is visible.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace tether

// What libtether-cuda.so exports, found by name with dlsym: plain C functions, so that the
// lookup does not depend on C++ name mangling. Both sides are built from one source tree; the
// version check keeps a stale libtether-cuda.so (whose Backend vtable may differ) from loading.
#define TETHER_CUDA_LIBRARY_NAME "libtether-cuda.so"
extern "C" {
// The TETHER_VERSION this library was built with.
const char* tether_cuda_version();
// Usable CUDA devices (0 when there is no driver or no GPU).
int tether_cuda_device_count();
// A new CUDA backend on `device` (< 0: the calling thread's current device), or nullptr with
// the reason written to `error` (at most error_size bytes, NUL-terminated).
tether::Backend* tether_cuda_make_backend(int device, char* error, std::size_t error_size);
}
