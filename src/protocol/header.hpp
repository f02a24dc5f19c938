// The wire header: a fixed-size, explicitly little-endian frame that precedes every payload
// frame. Field by field encoding (never a struct memcpy), so layout and endianness are the
// protocol's, not the compiler's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/error_code.hpp"

namespace tether {

constexpr std::uint32_t kProtocolMagic = 0x48544554;  // "TETH" read as little-endian bytes
constexpr std::uint16_t kProtocolVersion = 2;
constexpr std::size_t kHeaderBytes = 80;

enum class MessageType : std::uint8_t {
    hello = 1,      // worker -> center: join; payload empty, element_count = parameter count
    welcome = 2,    // center -> worker: worker id + current x~ (payload)
    exchange = 3,   // worker -> center: the strategy's payload
    reply = 4,      // center -> worker: the strategy's answer
    heartbeat = 5,  // worker -> center: still alive between exchanges
    bye = 6,        // worker -> center: finished; payload empty
    error = 7,      // center -> worker: payload is a UTF-8 reason
    snapshot = 8,   // to a center: "send me your x~"; from it: x~ of its server range (no join needed)
    buffers = 9,    // worker -> server 0: its model buffers, before an exchange; server 0 -> worker: b~, after a welcome
    log = 10,       // worker -> server 0: its own scalars for the run directory, UTF-8 JSON (protocol/worker_log.hpp)
    settings = 11,  // to a server: "what are the agreed settings?"; from it: them, as JSON (any fingerprint, no join)
    token = 12,     // server 0 -> worker, after its welcome (several servers): the worker's token for the others (center/server_tokens.hpp)
    servers = 13,   // rank -> server 0 (cluster.server_placement "ranks"): "my server is here"; answer: every server's address, once all are known
    lease = 14,     // worker -> server 0 (cluster.leases): "my next block of the data"; answer: the block (center/leases.hpp)
};
const char* to_string(MessageType type);

// What the payload holds. fp16 ... topk are the lossy codecs of codec/codec.hpp (cluster.codec).
enum class Dtype : std::uint8_t { none = 0, float32 = 1, utf8 = 2, fp16 = 3, bf16 = 4, int8 = 5, topk = 6, int4 = 7 };
constexpr std::uint8_t kLastDtype = 7;
const char* to_string(Dtype dtype);

// Set on the last chunk of a vector (protocol/framing.hpp): an exchange, reply, welcome, snapshot or buffers.
constexpr std::uint32_t kFlagLastChunk = 1u << 0;
// Set when a compressed payload is the change from the receiver's copy of a state vector (x_i,
// x~; codec/wire_vector.hpp) rather than the values themselves.
constexpr std::uint32_t kFlagChangeFromCopy = 1u << 1;
// On a snapshot request: answer once every worker has finished (the final x~), not now.
constexpr std::uint32_t kFlagFinal = 1u << 2;
// On a hello to a server k > 0, and on server 0's request for the final x~: the payload opens
// with server 0's token (kServerTokenBytes, center/server_tokens.hpp); a hello's settings follow it.
constexpr std::uint32_t kFlagToken = 1u << 3;
// On the center's heartbeat answer to a worker waiting for its welcome: the center holds it back
// on purpose (the warmstart: worker 0 trains alone first), so the worker's join timeout starts again.
constexpr std::uint32_t kFlagHeld = 1u << 4;
// On a reply, every chunk: dynamic local updates (Strategy::dynamic_windows) — the header's
// local_step is the window, in local steps, the worker uses from now on.
constexpr std::uint32_t kFlagWindow = 1u << 5;
// On a reply, every chunk: the run's budget (cluster.budget_samples) is trained; the worker
// stops once this exchange has landed.
constexpr std::uint32_t kFlagBudgetMet = 1u << 6;
// On server 0's snapshot request with kFlagFinal (and its token): the final x~ range arrived
// whole, so the server that waits for it may leave. Until then it stays: its answer may still be
// on the link, and a server that left would take it along (its socket does not linger).
constexpr std::uint32_t kFlagReceived = 1u << 7;

struct Header {
    MessageType type = MessageType::heartbeat;
    Dtype dtype = Dtype::none;
    std::uint32_t worker_id = 0;
    std::uint32_t flags = 0;
    std::uint64_t sequence = 0;        // per-worker exchange number
    std::uint64_t center_version = 0;  // from the worker: version at its last pull; from the center: now
    std::uint64_t local_step = 0;      // worker's local steps so far
    std::uint64_t samples = 0;         // worker's training samples so far
    std::uint32_t chunk_index = 0;     // this message's chunk of the vector (protocol/framing.hpp)
    std::uint32_t chunk_count = 1;
    std::uint64_t element_count = 0;   // elements in this message's payload
    std::uint64_t fingerprint = 0;     // of the agreed settings (cluster/agreed_settings.hpp); checked on every message
    ErrorCode error_code = ErrorCode::none;  // an `error` message's kind (protocol/error_code.hpp); none otherwise
};

std::vector<std::uint8_t> encode(const Header& header);

// Decodes and checks magic, version, size and type; on failure returns nullopt and sets `why`
// (short_header, bad_magic, ...).
std::optional<Header> decode(const std::uint8_t* bytes, std::size_t size, ErrorCode& why);

}  // namespace tether
