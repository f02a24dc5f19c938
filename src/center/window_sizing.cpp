#include "center/window_sizing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tether {

void record_step_rate(CenterWorker& w, std::uint64_t steps, CenterWorker::Clock::time_point now) {
    if (w.rate_steps > 0 || w.rate_since != CenterWorker::Clock::time_point{}) {
        const double seconds = std::chrono::duration<double>(now - w.rate_since).count();
        if (steps > w.rate_steps && seconds > 0) {
            const double rate = double(steps - w.rate_steps) / seconds;
            w.steps_per_second = w.steps_per_second > 0 ? 0.5 * (w.steps_per_second + rate) : rate;
        }
    }
    w.rate_steps = steps;
    w.rate_since = now;
}

std::optional<int> sized_window(const CenterWorker& w, const std::vector<std::unique_ptr<CenterWorker>>& workers, int window) {
    if (w.steps_per_second <= 0) return std::nullopt;
    double fastest = 0;
    for (const auto& other : workers)
        if (other->live()) fastest = std::max(fastest, other->steps_per_second);
    if (fastest <= 0) return std::nullopt;
    return std::max(1, int(std::floor(double(window) * w.steps_per_second / fastest)));
}

}  // namespace tether
