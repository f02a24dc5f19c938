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
// residual, which does not grow. A vector travels in chunks (protocol/framing.hpp, which cuts
// it and calls these), each encoded on its own, so both classes work on one slice
// [first, first + count) of the vector at a time and a receiver checks and decodes each chunk
// as it arrives. float32 loses nothing: no object of this file is made for it.
#pragma once

#include <tether/strategy.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/codec.hpp"

namespace tether {

class WireSender {
public:
    // `kind` must be state or update, and codec.kind lossy; the vector has n elements.
    WireSender(const CodecOptions& codec, WireVector kind, std::size_t n);
    // The receiver now holds x (a welcome): the copy c of a state restarts from it, the residual
    // of an update from zero.
    void reset(const float* x);
    CodecKind codec() const { return codec_->kind(); }
    WireVector kind() const { return kind_; }
    std::size_t max_encoded_bytes(std::size_t count) const { return codec_->max_encoded_bytes(count); }
    // Encodes the slice x[first, first + count) of the whole vector x into `out`
    // (max_encoded_bytes(count) long) and moves what it keeps of that slice on; returns the
    // bytes written.
    std::size_t encode(const float* x, std::size_t first, std::size_t count, std::uint8_t* out);

private:
    std::unique_ptr<Codec> codec_;
    WireVector kind_;
    std::size_t n_;
    std::vector<float> kept_;               // update: the residual; state: the receiver's copy c
    std::vector<float> scratch_, arrived_;  // one slice: what is encoded, what it decodes to
};

class WireReceiver {
public:
    WireReceiver(const CodecOptions& codec, WireVector kind, std::size_t n);
    void reset(const float* x);
    CodecKind codec() const { return codec_->kind(); }
    WireVector kind() const { return kind_; }
    // Decodes `size` bytes holding the slice [first, first + count) into out[first, first +
    // count) of the whole vector. Throws CodecError (size, index or value wrong, the slice
    // outside the vector, or a rebuilt element not finite) and then leaves `out` untouched.
    void decode(const std::uint8_t* bytes, std::size_t size, std::size_t first, std::size_t count, float* out);
    // Every slice of `x` arrived and was decoded: x is the receiver's copy now (state).
    void commit(const float* x);

private:
    std::unique_ptr<Codec> codec_;
    WireVector kind_;
    std::size_t n_;
    std::vector<float> copy_;   // state: c
    std::vector<float> slice_;  // one slice, decoded
};

}  // namespace tether
