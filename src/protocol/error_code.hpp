// What an `error` message says, as a kind the receiver can act on: the header's error_code, beside
// the human text of the payload ("reason: detail"). One code per rejection reason of
// docs/protocol.md ("Validation and rejection"); a receiver branches on the code, never on the
// text, so rewording a message changes no behaviour.
#pragma once

#include <cstdint>
#include <string>

namespace tether {

enum class ErrorCode : std::uint32_t {
    none = 0,  // not an error message
    other = 1,  // a reason without a code of its own
    short_header, long_header, bad_magic, protocol_version, unknown_type, unknown_dtype, bad_chunk,
    unknown_error_code, wrong_fingerprint, message_too_large, extra_frames, wrong_count, duplicate_hello, not_joined,
    too_many_requests, bad_token, no_token, id_taken, too_many_peers, run_full, unknown_worker,
    not_welcomed, exchange_in_flight, stale_sequence, future_version, wrong_dtype, wrong_chunk_count,
    chunk_out_of_order, wrong_encoding, wrong_size, non_finite_payload, bad_encoding, unexpected_type,
    malformed_log, log_too_large, implausible_samples, not_a_directory, not_trusted, malformed_servers_request,
    other_initial_parameters,
};
constexpr std::uint32_t kLastErrorCode = std::uint32_t(ErrorCode::other_initial_parameters);

// The code of a rejection reason ("unknown worker"); `other` for a reason not in the table.
ErrorCode error_code_for(const std::string& reason);
// The reason a code stands for ("unknown worker"); "" for none and other.
const char* reason_of(ErrorCode code);

}  // namespace tether
