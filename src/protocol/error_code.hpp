// Why a message was refused, as a kind: what the center counts (CenterStats::rejected), what an
// `error` message's header carries (error_code) and what a receiver acts on. The payload's human
// text ("reason: detail") is made from the code here, in one place. One code per rejection reason
// of docs/protocol.md ("Validation and rejection"); nothing branches on the text, so rewording a
// message changes no behaviour.
#pragma once

#include <cstdint>
#include <string>

namespace tether {

enum class ErrorCode : std::uint32_t {
    none = 0,   // not an error message
    other = 1,  // a peer's reason without a code of its own (tether sends none)
    short_header, long_header, bad_magic, protocol_version, unknown_type, unknown_dtype, bad_chunk,
    unknown_error_code, wrong_fingerprint, message_too_large, extra_frames, wrong_count, duplicate_hello, not_joined,
    too_many_requests, bad_token, no_token, id_taken, too_many_peers, run_full, unknown_worker,
    not_welcomed, exchange_in_flight, stale_sequence, future_version, wrong_dtype, wrong_chunk_count,
    chunk_out_of_order, wrong_encoding, wrong_size, non_finite_payload, bad_encoding, unexpected_type,
    malformed_log, log_too_large, implausible_samples, not_a_directory, not_trusted, malformed_servers_request,
    other_initial_parameters, malformed_lease,
};
constexpr std::uint32_t kLastErrorCode = std::uint32_t(ErrorCode::malformed_lease);

// The reason a code stands for, as docs/protocol.md and the `error` text give it ("unknown worker").
const char* to_string(ErrorCode code);

// A refusal as a part decides it: its kind, and what was expected instead.
struct Refusal {
    ErrorCode code = ErrorCode::none;
    std::string detail;
};

}  // namespace tether
