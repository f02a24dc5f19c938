// One direction of a compressed exchange: what the sender of a vector keeps so that a lossy
// codec loses nothing over time, and what its receiver keeps to rebuild it. The strategy says
// what the vector is (WireKinds, <tether/strategy.hpp>):
//   update  sender: v = x + residual; sends Q(v); residual = v - Q(v)   (error feedback)
//           receiver: x^ = Q(v)
//   state   both ends keep c, the receiver's last x^ (both start from the welcome's x~)
//           sender: sends Q(x - c); c = c + Q(x - c)
//           receiver: x^ = c + Q(x - c); c = x^
// Q is the codec's encode + decode; the sender decodes its own message, so both ends compute
// c from the same floats and stay equal bit for bit. Over an exchange sequence the sum of what
// arrived (update) or the last value that arrived (state) differs from the truth by one
// residual, which does not grow. A vector travels in frames of at most frame_elements elements
// (cluster.shard_elements), each encoded on its own, so a receiver checks and decodes each
// frame as it arrives. float32 loses nothing: no object of this file is made for it.
#pragma once

#include <tether/strategy.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/codec.hpp"
#include "protocol/header.hpp"
#include "transport/payload.hpp"

namespace tether {

Dtype dtype_of(CodecKind kind);
// The most bytes one message's payload may hold: frame_elements elements as float32 or through
// `codec`, whichever is larger (a hello's settings ride on the slack the caller adds).
std::size_t max_payload_bytes(const CodecOptions& codec, std::size_t frame_elements);

// Frame k of a vector of n elements cut into frames of `frame_elements`: [first, first + count).
struct FrameRange {
    std::size_t first = 0, count = 0;
};
std::size_t frame_count(std::size_t n, std::size_t frame_elements);
FrameRange frame_range(std::size_t n, std::size_t frame_elements, std::size_t frame);

class WireSender;

// The frames of one vector message, in order: calls send(header, frame) with `h` completed for
// each frame (dtype, shard count and id, element count, flags), the frame encoded by `encoder`
// or, without one, a zero-copy float32 slice of `data`. The worker's exchanges and the
// center's replies and welcomes share this, so both ends cut a vector the same way.
template <typename Send>
void for_each_frame(Header h, const Payload& data, std::size_t n, std::size_t frame_elements, WireSender* encoder,
                    Send send);

class WireSender {
public:
    // `kind` must be state or update, and codec.kind lossy.
    WireSender(const CodecOptions& codec, WireVector kind, std::size_t n, std::size_t frame_elements);
    // The receiver now holds x (a welcome): the copy c of a state restarts from it, the residual
    // of an update from zero.
    void reset(const float* x);
    // Encodes x[0, n) into one payload per frame (slices of one new buffer, so a zero-copy send
    // of one frame never shares memory with the next exchange).
    std::vector<Payload> encode(const float* x);
    Dtype dtype() const { return dtype_of(codec_->kind()); }
    // Header flags every frame carries.
    std::uint32_t flags() const { return kind_ == WireVector::state ? kFlagChangeFromCopy : 0; }

private:
    std::unique_ptr<Codec> codec_;
    WireVector kind_;
    std::size_t n_, frame_elements_;
    std::vector<float> kept_;     // update: the residual; state: the receiver's copy c
    std::vector<float> scratch_, arrived_;  // one frame: what is encoded, what it decodes to
    Payload buffer_;                        // the frames' bytes, reused once nobody holds them
};

class WireReceiver {
public:
    WireReceiver(const CodecOptions& codec, WireVector kind, std::size_t n, std::size_t frame_elements);
    void reset(const float* x);
    Dtype dtype() const { return dtype_of(codec_->kind()); }
    std::uint32_t flags() const { return kind_ == WireVector::state ? kFlagChangeFromCopy : 0; }
    // Decodes frame `frame` (`bytes` bytes) into out[first, first + count) of the whole vector.
    // Throws CodecError (size, index or value wrong, or a rebuilt element not finite) and then
    // leaves `out` untouched.
    void decode(std::size_t frame, const std::uint8_t* bytes, std::size_t size, float* out);
    // Every frame of `x` arrived and was decoded: x is the receiver's copy now (state).
    void commit(const float* x);

private:
    std::unique_ptr<Codec> codec_;
    WireVector kind_;
    std::size_t n_, frame_elements_;
    std::vector<float> copy_;  // state: c
    std::vector<float> frame_;
};

template <typename Send>
void for_each_frame(Header h, const Payload& data, std::size_t n, std::size_t frame_elements, WireSender* encoder,
                    Send send) {
    const std::vector<Payload> encoded = encoder ? encoder->encode(data.floats()) : std::vector<Payload>{};
    h.dtype = encoder ? encoder->dtype() : Dtype::float32;
    h.shard_count = std::uint32_t(frame_count(n, frame_elements));
    for (std::uint32_t s = 0; s < h.shard_count; ++s) {
        const FrameRange r = frame_range(n, frame_elements, s);
        h.shard_id = s;
        h.element_count = r.count;
        h.flags = (s + 1 == h.shard_count ? kFlagLastShard : 0) | (encoder ? encoder->flags() : 0);
        send(h, encoder ? encoded[s] : data.slice(r.first * sizeof(float), r.count * sizeof(float)));
    }
}

}  // namespace tether
