// Dynamic local updates (Liu et al. 2024, "DyLU"; Strategy::dynamic_windows): the center
// measures each worker's local steps per second between its exchanges (the steps each
// exchange's header carries, over the wall time since the previous one: compute and link
// alike, which is what a window's end in wall-clock time depends on) and sizes its next window
//   H_i = max(1, floor(H * v_i / v_max)),   v_max the fastest live worker's rate,
// so that fast and slow workers' windows end together and the fastest keeps the configured H.
// A rate is an average of the last measurements (each weighs half), so one slow exchange does
// not halve a window. A worker is told its window with its reply (kFlagWindow).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "center/center_worker.hpp"

namespace tether {

// Records `w`'s exchange at `now`, whose header said `steps` local steps so far.
void record_step_rate(CenterWorker& w, std::uint64_t steps, CenterWorker::Clock::time_point now);

// `w`'s window out of the configured `window` given every worker's rate; unset until `w` has
// a rate of its own (its second exchange).
std::optional<int> sized_window(const CenterWorker& w, const std::vector<std::unique_ptr<CenterWorker>>& workers, int window);

}  // namespace tether
