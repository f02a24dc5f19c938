// How a vector crosses the wire, for both ends (the worker's exchanges, the center's welcomes,
// replies and snapshots): cut into chunks on the way out, checked and reassembled on the way in.
// A vector of n elements travels as chunk_count(n, E) messages, E = cluster.chunk_elements;
// chunk k holds elements [k·E, min((k+1)·E, n)) (header: chunk_index k, chunk_count, element_count,
// flag kFlagLastChunk on the last), as float32 or encoded on its own by a lossy codec
// (codec/wire_vector.hpp). Both ends derive the layout from n and E, both agreed settings, so a
// receiver trusts no length field: it knows what each chunk must hold before it arrives.
#pragma once

#include <tether/strategy.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codec/codec.hpp"
#include "protocol/header.hpp"
#include "transport/payload.hpp"

namespace tether {

class WireSender;
class WireReceiver;

// Chunk k of a vector of n elements cut into chunks of `chunk_elements`: [first, first + count).
struct ChunkRange {
    std::size_t first = 0, count = 0;
};
std::size_t chunk_count(std::size_t n, std::size_t chunk_elements);
ChunkRange chunk_range(std::size_t n, std::size_t chunk_elements, std::size_t chunk);

Dtype dtype_of(CodecKind kind);
// The most bytes one chunk's payload may hold: chunk_elements elements as float32 or through
// `codec`, whichever is larger (a hello's settings ride on the slack the caller adds).
std::size_t max_payload_bytes(const CodecOptions& codec, std::size_t chunk_elements);

// What both ends of one direction agree a vector looks like on the wire: n elements in chunks
// of chunk_elements, as float32 or through a lossy codec, for which `kind` says whether the
// vector is a state or an update (codec/wire_vector.hpp).
struct ChunkFormat {
    ChunkFormat(std::size_t elements, std::size_t chunk_elements, CodecOptions codec = {},
                WireVector kind = WireVector::unknown)
        : elements(elements), chunk_elements(chunk_elements), codec(codec), kind(kind) {}
    std::size_t elements, chunk_elements;
    CodecOptions codec;
    WireVector kind;
};

// The sending end: one vector message as its chunks, in order.
class ChunkSender {
public:
    explicit ChunkSender(const ChunkFormat& format);
    ~ChunkSender();
    // The receiver now holds x (a welcome): a lossy codec's state starts again from it.
    void reset(const float* x);
    // Calls send(header, payload) for each chunk of `data` (n floats), `h` completed for each
    // (dtype, chunk index and count, element count, flags): float32 chunks are slices of `data`
    // (zero-copy), lossy ones are encoded into a buffer of this sender's.
    template <typename Send>
    void send(Header h, const Payload& data, Send&& send);

private:
    // A lossy codec: every chunk of x encoded, slices of one buffer (so a zero-copy send of one
    // vector never shares memory with the next).
    std::vector<Payload> encode(const float* x);

    ChunkFormat format_;
    std::unique_ptr<WireSender> encoder_;  // null for float32
    Payload buffer_;                       // the encoded chunks' bytes, reused once nobody holds them
};

// The receiving end: each chunk of one vector is checked (dtype, chunk count and order, element
// count, encoding flag, size, and with `refuse_non_finite` NaN/Inf in float32) and placed as
// it arrives; the vector is complete at its last chunk. A one-chunk float32 vector is the
// received frame itself, adopted without a copy (the center answers in it, in place); longer
// or compressed ones are reassembled or decoded into one of two recycled buffers, which a reply
// still queued in ZeroMQ (or a vector the caller kept) may hold. A refused chunk drops the
// partial vector whole; drop() does the same when the peer was refused for another reason.
// Streaming (float32 only): nothing is assembled; each checked chunk comes out as a piece, the
// received frame itself with where it lands, for a receiver that applies it at once
// (CenterRuleBase::takes_ranges) and so keeps no copy of the sender's vector.
struct ChunkPiece {
    Payload payload;
    std::size_t first = 0, count = 0;  // its elements of the vector
    bool last = false;                 // the vector's final chunk
};

class ChunkAssembler {
public:
    enum class Result { partial, complete, refused, piece };

    // `what` names the vector in refusals ("exchange"); `codec_key` the config key that chose
    // its codec ("cluster.codec"; empty where it is always float32). `streams`: hand out float32
    // chunks as pieces (Result::piece) instead of assembling them; ignored for other codecs.
    ChunkAssembler(const ChunkFormat& format, std::string what, std::string codec_key, bool refuse_non_finite,
                   bool streams = false);
    ~ChunkAssembler();
    ChunkAssembler(ChunkAssembler&&) noexcept;
    // A lossy state's receiver copy starts again from x (a welcome).
    void reset(const float* x);
    // Checks and places one chunk of the vector. `complete`: take() it. `refused`: refusal()
    // says why, and the partial vector is gone (the next vector starts at chunk 0).
    Result add(const Header& h, const Payload& payload);
    const Refusal& refusal() const { return refusal_; }
    // After Result::piece: the chunk, until the next add().
    const ChunkPiece& piece() const { return piece_; }
    bool streams() const { return streams_; }
    // The complete vector (n floats); the assembler lets go of it.
    Payload take();
    // Forgets a partial vector (its sender was refused for another reason).
    void drop();
    std::uint32_t chunks_received() const { return next_; }

private:
    Result refuse(ErrorCode code, std::string detail);

    ChunkFormat format_;
    std::string what_, codec_key_;
    bool refuse_non_finite_;
    bool streams_;
    Dtype dtype_;
    std::uint32_t flags_;   // the encoding flag every chunk must carry
    std::uint32_t chunks_;  // of every vector
    std::unique_ptr<WireReceiver> decoder_;  // null for float32
    RecycledPayloads buffers_;
    Payload vector_;         // the vector being received, or complete
    std::uint32_t next_ = 0;  // the chunk expected next
    Refusal refusal_;
    ChunkPiece piece_;
};

// The encoding flag every chunk of a vector in `format` carries (kFlagChangeFromCopy for a
// lossy state, else none).
std::uint32_t chunk_flags(const ChunkFormat& format);

template <typename Send>
void ChunkSender::send(Header h, const Payload& data, Send&& send) {
    const std::size_t n = format_.elements, e = format_.chunk_elements;
    const std::vector<Payload> encoded = encoder_ ? encode(data.floats()) : std::vector<Payload>{};
    h.dtype = dtype_of(format_.codec.kind);
    h.chunk_count = std::uint32_t(chunk_count(n, e));
    // The caller's own flags (kFlagWindow on a reply) go on every chunk, beside the framing's.
    const std::uint32_t flags = chunk_flags(format_) | (h.flags & ~(kFlagLastChunk | kFlagChangeFromCopy));
    for (std::uint32_t k = 0; k < h.chunk_count; ++k) {
        const ChunkRange r = chunk_range(n, e, k);
        h.chunk_index = k;
        h.element_count = r.count;
        h.flags = (k + 1 == h.chunk_count ? kFlagLastChunk : 0) | flags;
        send(h, encoder_ ? encoded[k] : data.slice(r.first * sizeof(float), r.count * sizeof(float)));
    }
}

}  // namespace tether
