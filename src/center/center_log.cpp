// A worker's own scalars (protocol/worker_log.hpp): one message of UTF-8 JSON, from a joined
// worker only (Center::handle refuses the others before they get here), at most kMaxLogBytes.
// A malformed one is refused and counted by reason, as every bad message is; a good one counts
// the samples its header reports, as a heartbeat does, and goes to on_log. Nothing answers it.
#include "center/center.hpp"
#include "center/center_worker.hpp"
#include "protocol/worker_log.hpp"

namespace tether {

void Center::handle_log(Worker& w, const Header& h, const Frames& frames) {
    const std::size_t bytes = frames.payload.size();
    if (h.dtype != Dtype::utf8 || h.chunk_count != 1 || h.element_count != bytes)
        return reject(w.peer, w.id, ErrorCode::malformed_log,
                      std::string("a log is one chunk of utf8 whose element count is its byte count; got ") +
                          to_string(h.dtype) + ", " + std::to_string(h.chunk_count) + " chunk(s), " +
                          std::to_string(h.element_count) + " elements for " + std::to_string(bytes) + " bytes");
    if (bytes > kMaxLogBytes)
        return reject(w.peer, w.id, ErrorCode::log_too_large,
                      std::to_string(bytes) + " bytes, at most " + std::to_string(kMaxLogBytes));
    std::string problem;
    std::optional<nlohmann::json> scalars = decode_log(frames.payload.data(), bytes, problem);
    if (!scalars) return reject(w.peer, w.id, ErrorCode::malformed_log, problem);
    membership_.count_samples(w, h.samples);
    if (on_log) on_log(LogRecord{w.id, w.samples, stats_.total_samples, std::move(*scalars)});
}

}  // namespace tether
