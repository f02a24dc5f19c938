// Stand-ins for the CUDA backend in a build configured without nvcc.
#include "backend/cuda_backend.hpp"
#include "util/errors.hpp"

namespace tether {

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(int) {
    throw ConfigError("training.device: \"cuda\" was asked for, but this tether was built without CUDA "
                      "(reconfigure with nvcc on PATH and -Dcuda=enabled), or use \"cpu\" / \"auto\"");
}

}  // namespace tether
