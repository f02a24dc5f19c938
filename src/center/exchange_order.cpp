#include "center/exchange_order.hpp"

#include <string>

namespace tether {

std::optional<Refusal> exchange_out_of_order(const CenterWorker& w, const Header& h, std::uint64_t version) {
    if (h.chunk_index > 0 && w.from_worker->chunks_received() > 0) {
        if (h.sequence == w.sequence) return std::nullopt;
        return Refusal{ErrorCode::stale_sequence, "chunk " + std::to_string(h.chunk_index) + " of exchange " +
                                                      std::to_string(h.sequence) + " while exchange " +
                                                      std::to_string(w.sequence) + " is being received"};
    }
    if (h.chunk_index > 0) return std::nullopt;  // the assembler refuses it: no first chunk came
    if (h.sequence <= w.accepted_sequence)
        return Refusal{ErrorCode::stale_sequence, "exchange " + std::to_string(h.sequence) + " after exchange " +
                                                      std::to_string(w.accepted_sequence) +
                                                      " was accepted; each exchange must carry a higher sequence number"};
    if (h.center_version > version)
        return Refusal{ErrorCode::future_version, "pulled at version " + std::to_string(h.center_version) +
                                                      ", but x~ is at version " + std::to_string(version)};
    return std::nullopt;
}

}  // namespace tether
