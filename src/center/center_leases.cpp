// A worker's ask for its next block of the data (cluster.leases, center/leases.hpp): one `lease`
// message of UTF-8 JSON {"want": n, "total": t} (t: the positions the worker's data give, 0:
// none named), answered at once with {"start": q, "count": c}; c = 0: no work is left. Server 0
// alone leases; the ask counts the samples its header reports, as a heartbeat does.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "center/center.hpp"
#include "center/center_worker.hpp"

namespace tether {

namespace {
constexpr std::size_t kMaxLeaseAskBytes = 256;
constexpr std::uint64_t kMaxLeaseWant = std::uint64_t(1) << 32;
}  // namespace

void Center::handle_lease(Worker& w, const Header& h, const Frames& frames) {
    if (!options_.membership.leases)
        return reject(w.peer, w.id, ErrorCode::unexpected_type, "leases come from server 0; this is another server of the center");
    const std::size_t bytes = frames.payload.size();
    if (h.dtype != Dtype::utf8 || h.chunk_count != 1 || h.element_count != bytes || bytes > kMaxLeaseAskBytes)
        return reject(w.peer, w.id, ErrorCode::malformed_lease,
                      "a lease ask is one chunk of at most " + std::to_string(kMaxLeaseAskBytes) + " bytes of utf8");
    const auto ask = nlohmann::json::parse(frames.payload.begin(), frames.payload.end(), nullptr, /*allow_exceptions=*/false);
    const auto field = [&](const char* name) -> std::optional<std::uint64_t> {
        if (!ask.is_object() || !ask.contains(name) || !ask[name].is_number_unsigned()) return std::nullopt;
        return ask[name].get<std::uint64_t>();
    };
    const auto want = field("want"), total = field("total");
    if (!want || !total || *want == 0 || *want > kMaxLeaseWant)
        return reject(w.peer, w.id, ErrorCode::malformed_lease,
                      "expected {\"want\": 1.." + std::to_string(kMaxLeaseWant) + ", \"total\": n}");
    membership_.count_samples(w, h.samples);
    // No block beyond two windows (where the window is known), so that no peer hoards the
    // stream, and none once the budget is trained.
    const std::uint64_t window = options_.membership.max_samples_per_window;
    const std::uint64_t asked = window > 0 ? std::min(*want, 2 * window) : *want;
    const Lease lease = budget_met() ? Lease{}
                                     : membership_.leases().grant(w.id, asked, w.samples, w.exchanged_samples, *total,
                                                                  std::uint64_t(std::max(stats_.live_workers(), 1)));
    const std::string answer = nlohmann::json{{"start", lease.start}, {"count", lease.count}}.dump();
    Header out;
    out.type = MessageType::lease;
    out.dtype = Dtype::utf8;
    out.worker_id = w.id;
    out.sequence = h.sequence;
    out.center_version = updates_.version();
    out.fingerprint = options_.fingerprint;
    out.element_count = answer.size();
    if (budget_met()) out.flags |= kFlagBudgetMet;
    try {
        const auto header = encode(out);
        endpoint_->send(w.peer, header, answer.data(), answer.size());
        stats_.bytes_sent += header.size() + answer.size();
    } catch (const DeliveryError& e) {
        lose(w, e.what());
    }
}

}  // namespace tether
