// Which device a process or a worker computes on, from a device string ("auto", "cpu",
// "cuda" or "cuda:N": training.device, training.eval_device) and the worker's slot. With
// several GPUs, worker K takes GPU (K mod visible GPUs) unless the string pins one.
#pragma once

#include <optional>
#include <string>

#include "backend/backend.hpp"

namespace tether {

// True for auto, cpu, cuda and cuda:N (N a non-negative integer).
bool is_device_string(const std::string& device);

// The BackendOptions for `device`, given this worker's `slot` (local rank under a launcher,
// else the worker's index) and the number of GPUs visible to the process.
BackendOptions choose_backend(const std::string& device, int threads, int slot, int visible_gpus);
// As above, with the GPUs this process sees.
BackendOptions choose_backend(const std::string& device, int threads, int slot);

}  // namespace tether
