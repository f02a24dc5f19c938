#include "backend/backend.hpp"

#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "util/errors.hpp"

namespace tether {

std::string to_string(DeviceKind kind) { return kind == DeviceKind::cuda ? "cuda" : "cpu"; }

namespace {

std::unique_ptr<Backend> make_gpu_backend(const BackendOptions& options) {
    std::unique_ptr<Backend> backend = make_cuda_backend(options.cuda_device);
    backend->allow_tf32(options.tf32);
    return backend;
}

}  // namespace

std::unique_ptr<Backend> make_backend(const BackendOptions& options) {
    if (options.device == "cpu") return make_cpu_backend(options.threads, options.flush_denormals);
    if (options.device == "cuda") {
        if (!cuda_built()) return make_cuda_backend(options.cuda_device);  // throws with the reason
        if (cuda_device_count() == 0)
            throw ConfigError("training.device: \"cuda\" was asked for, but no CUDA GPU is visible on this "
                              "machine; use \"cpu\" or \"auto\"");
        return make_gpu_backend(options);
    }
    if (options.device == "auto")
        return nvidia_driver_present() && cuda_device_count() > 0 ? make_gpu_backend(options)
                                       : make_cpu_backend(options.threads, options.flush_denormals);
    throw ConfigError("training.device: \"" + options.device + "\" is not a device; expected auto, cpu or cuda");
}

}  // namespace tether
