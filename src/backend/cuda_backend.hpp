#pragma once

#include <memory>

#include "backend/backend.hpp"

namespace tether {

// Defined in cuda/cuda_backend.cu when the CUDA backend is built, else in
// src/backend/no_cuda.cpp (which reports that the build has no CUDA).
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace tether
