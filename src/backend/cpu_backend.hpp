#pragma once

#include <memory>

#include "backend/backend.hpp"

namespace tether {

// threads <= 0 means one per hardware thread. `flush_denormals`: see BackendOptions.
std::unique_ptr<Backend> make_cpu_backend(int threads, bool flush_denormals = false);

// OpenBLAS keeps one process-wide thread count; callers running several workers in one
// process set it to 1 so the workers' GEMMs do not oversubscribe the cores.
void set_blas_threads(int threads);

}  // namespace tether
