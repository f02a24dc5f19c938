#include "protocol/error_code.hpp"

#include <utility>

namespace tether {

namespace {

constexpr std::pair<ErrorCode, const char*> kReasons[] = {
    {ErrorCode::none, "none"},
    {ErrorCode::other, "other"},
    {ErrorCode::short_header, "short header"},
    {ErrorCode::long_header, "long header"},
    {ErrorCode::bad_magic, "bad magic"},
    {ErrorCode::protocol_version, "protocol version"},
    {ErrorCode::unknown_type, "unknown type"},
    {ErrorCode::unknown_dtype, "unknown dtype"},
    {ErrorCode::bad_chunk, "bad chunk"},
    {ErrorCode::unknown_error_code, "unknown error code"},
    {ErrorCode::wrong_fingerprint, "wrong fingerprint"},
    {ErrorCode::message_too_large, "message too large"},
    {ErrorCode::extra_frames, "extra frames"},
    {ErrorCode::wrong_count, "wrong count"},
    {ErrorCode::duplicate_hello, "duplicate hello"},
    {ErrorCode::not_joined, "not joined"},
    {ErrorCode::too_many_requests, "too many requests"},
    {ErrorCode::bad_token, "bad token"},
    {ErrorCode::no_token, "no token"},
    {ErrorCode::id_taken, "id taken"},
    {ErrorCode::too_many_peers, "too many peers"},
    {ErrorCode::run_full, "run full"},
    {ErrorCode::unknown_worker, "unknown worker"},
    {ErrorCode::not_welcomed, "not welcomed"},
    {ErrorCode::exchange_in_flight, "exchange in flight"},
    {ErrorCode::stale_sequence, "stale sequence"},
    {ErrorCode::future_version, "future version"},
    {ErrorCode::wrong_dtype, "wrong dtype"},
    {ErrorCode::wrong_chunk_count, "wrong chunk count"},
    {ErrorCode::chunk_out_of_order, "chunk out of order"},
    {ErrorCode::wrong_encoding, "wrong encoding"},
    {ErrorCode::wrong_size, "wrong size"},
    {ErrorCode::non_finite_payload, "non-finite payload"},
    {ErrorCode::bad_encoding, "bad encoding"},
    {ErrorCode::unexpected_type, "unexpected type"},
    {ErrorCode::malformed_log, "malformed log"},
    {ErrorCode::log_too_large, "log too large"},
    {ErrorCode::implausible_samples, "implausible samples"},
    {ErrorCode::not_a_directory, "not a directory"},
    {ErrorCode::not_trusted, "not trusted"},
    {ErrorCode::malformed_servers_request, "malformed servers request"},
    {ErrorCode::other_initial_parameters, "other initial parameters"},
    {ErrorCode::malformed_lease, "malformed lease"},
};

}  // namespace

const char* to_string(ErrorCode code) {
    for (const auto& [c, text] : kReasons)
        if (c == code) return text;
    return "unknown error code";
}

}  // namespace tether
