// Codecs for what crosses the wire: a float32 vector in, fewer bytes out, float32 again on the
// other side. They sit between a strategy's rule and the transport, on both sides; the rule
// always sees float32, and the center's accumulators stay float32 or wider.
//   float32  as it is                                            4 bytes per element
//   fp16     IEEE binary16, round to nearest even                2
//   bf16     the upper half of float32, round to nearest even    2
//   int8     per block of 256: scale = max|x| / 127, q = round(x / scale)   1 + 4/256
//   int4     per block of 64: scale = max|x| / 7, q in [-7, 7], 2 a byte    1/2 + 4/64
//   topk     the k = ceil(ratio n) largest |x| as (index, value) pairs     8 per kept element, + 8
// A codec is stateless: what compression leaves out is kept by its caller (codec/wire_vector.hpp:
// error feedback for updates, the receiver's copy for states; Stich et al., "Sparsified SGD
// with Memory", NeurIPS 2018), so nothing is lost, only late.
// decode() never trusts its input: a size that does not match the element count, an index
// out of range or a non-finite value is an error, and `out` is then left untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <tether/cluster_options.hpp>

namespace tether {

enum class CodecKind : std::uint8_t { float32 = 0, fp16 = 1, bf16 = 2, int8 = 3, topk = 4, int4 = 5 };

const char* to_string(CodecKind kind);
// The kind named `name` (float32, fp16, bf16, int8, int4, topk); throws std::invalid_argument.
CodecKind codec_kind(const std::string& name);

class CodecError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class Codec {
public:
    virtual ~Codec() = default;
    virtual CodecKind kind() const = 0;
    // The most bytes encode() writes for n elements.
    virtual std::size_t max_encoded_bytes(std::size_t n) const = 0;
    // Encodes x[0, n) into `out` (max_encoded_bytes(n) long); returns the bytes written.
    virtual std::size_t encode(const float* x, std::size_t n, std::uint8_t* out) const = 0;
    // Decodes `bytes` bytes holding n elements into out[0, n); throws CodecError when they do
    // not (wrong size, index out of range, non-finite value).
    virtual void decode(const std::uint8_t* in, std::size_t bytes, std::size_t n, float* out) const = 0;
};

struct CodecOptions {
    CodecKind kind = CodecKind::float32;
    double topk_ratio = ClusterOptions{}.topk_ratio;  // topk: share of the elements sent, (0, 1]
};

std::unique_ptr<Codec> make_codec(const CodecOptions& options);
// float32 is the one codec that loses nothing.
inline bool lossy(CodecKind kind) { return kind != CodecKind::float32; }

}  // namespace tether
