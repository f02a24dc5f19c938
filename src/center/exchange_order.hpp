// Whether an exchange's chunk comes in order: its first chunk newer than the last exchange
// accepted from the worker (a replayed or reordered one would apply an update twice, or an old
// one late) and pulled from a version the center has had (a pull from the future would make
// staleness negative: DynSGD divides by v - v_pull + 1); its other chunks carry its sequence.
#pragma once

#include <cstdint>
#include <optional>

#include "center/center_worker.hpp"
#include "protocol/error_code.hpp"
#include "protocol/header.hpp"

namespace tether {

// Why chunk `h` from `w` is out of order while x~ is at `version`; nothing when it is in order.
std::optional<Refusal> exchange_out_of_order(const CenterWorker& w, const Header& h, std::uint64_t version);

}  // namespace tether
