#include "backend/device_choice.hpp"

#include <cstdlib>

#include "util/errors.hpp"

namespace tether {
namespace {

// N of "cuda:N", or nullopt when `device` has no such suffix.
std::optional<int> pinned_gpu(const std::string& device) {
    if (device.rfind("cuda:", 0) != 0 || device.size() == 5 || device.size() > 9) return std::nullopt;
    for (std::size_t i = 5; i < device.size(); ++i)
        if (device[i] < '0' || device[i] > '9') return std::nullopt;
    return std::atoi(device.c_str() + 5);
}

}  // namespace

bool is_device_string(const std::string& device) {
    return device == "auto" || device == "cpu" || device == "cuda" || pinned_gpu(device).has_value();
}

BackendOptions choose_backend(const std::string& device, int threads, int slot, int visible_gpus) {
    BackendOptions options;
    options.threads = threads;
    options.device = device;
    if (const auto pinned = pinned_gpu(device)) {
        if (visible_gpus > 0 && *pinned >= visible_gpus)
            throw ConfigError("training.device: \"" + device + "\" names GPU " + std::to_string(*pinned) + ", but " +
                              std::to_string(visible_gpus) + " GPU(s) are visible (cuda:0 to cuda:" +
                              std::to_string(visible_gpus - 1) + ")");
        options.device = "cuda";
        options.cuda_device = *pinned;
    } else if (device != "cpu" && visible_gpus > 0) {
        options.cuda_device = (slot < 0 ? 0 : slot) % visible_gpus;
    }
    return options;
}

BackendOptions choose_backend(const std::string& device, int threads, int slot) {
    const bool count = device != "cpu" && (device != "auto" || nvidia_driver_present());
    return choose_backend(device, threads, slot, count ? cuda_device_count() : 0);
}

}  // namespace tether
