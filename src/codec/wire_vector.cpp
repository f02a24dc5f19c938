#include "codec/wire_vector.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "util/all_finite.hpp"

namespace tether {

Dtype dtype_of(CodecKind kind) {
    switch (kind) {
        case CodecKind::float32: return Dtype::float32;
        case CodecKind::fp16: return Dtype::fp16;
        case CodecKind::bf16: return Dtype::bf16;
        case CodecKind::int8: return Dtype::int8;
        case CodecKind::topk: return Dtype::topk;
    }
    throw std::invalid_argument("unknown codec");
}

std::size_t max_payload_bytes(const CodecOptions& codec, std::size_t frame_elements) {
    return std::max(frame_elements * sizeof(float), make_codec(codec)->max_encoded_bytes(frame_elements));
}

std::size_t frame_count(std::size_t n, std::size_t frame_elements) {
    return std::max<std::size_t>(1, (n + frame_elements - 1) / frame_elements);
}

FrameRange frame_range(std::size_t n, std::size_t frame_elements, std::size_t frame) {
    const std::size_t first = std::min(n, frame * frame_elements);
    return {first, std::min(frame_elements, n - first)};
}

namespace {

void check_kind(WireVector kind, const CodecOptions& codec) {
    if (kind != WireVector::state && kind != WireVector::update)
        throw std::logic_error(std::string("codec ") + to_string(codec.kind) +
                               ": the strategy does not say whether this vector is a state or an update");
    if (!lossy(codec.kind)) throw std::logic_error("float32 needs no wire state");
}

}  // namespace

WireSender::WireSender(const CodecOptions& codec, WireVector kind, std::size_t n, std::size_t frame_elements)
    : codec_(make_codec(codec)), kind_(kind), n_(n), frame_elements_(frame_elements), kept_(n, 0.f),
      scratch_(std::min(n, frame_elements)), arrived_(scratch_.size()) {
    check_kind(kind, codec);
}

void WireSender::reset(const float* x) {
    if (kind_ == WireVector::state) std::copy(x, x + n_, kept_.begin());
    else std::fill(kept_.begin(), kept_.end(), 0.f);
}

std::vector<Payload> WireSender::encode(const float* x) {
    const std::size_t frames = frame_count(n_, frame_elements_);
    std::vector<std::size_t> offsets{0};
    for (std::size_t f = 0; f < frames; ++f)
        offsets.push_back(offsets.back() + codec_->max_encoded_bytes(frame_range(n_, frame_elements_, f).count));
    // The last exchange's buffer once ZeroMQ has let go of it: a fresh one of this size each
    // time would cost page faults on every exchange.
    if (!(buffer_.unique() && buffer_.size() >= offsets.back())) buffer_ = Payload::allocate(offsets.back());
    const Payload& buffer = buffer_;
    std::vector<Payload> out;
    for (std::size_t f = 0; f < frames; ++f) {
        const FrameRange r = frame_range(n_, frame_elements_, f);
        float* kept = kept_.data() + r.first;
        float* v = scratch_.data();
        // What is sent: the update plus the residual, or the state's change from the copy.
        if (kind_ == WireVector::update)
            for (std::size_t i = 0; i < r.count; ++i) v[i] = x[r.first + i] + kept[i];
        else
            for (std::size_t i = 0; i < r.count; ++i) v[i] = x[r.first + i] - kept[i];
        std::uint8_t* bytes = buffer.data() + offsets[f];
        const std::size_t used = codec_->encode(v, r.count, bytes);
        // What the receiver will read, decoded here from the same bytes.
        float* arrived = arrived_.data();
        codec_->decode(bytes, used, r.count, arrived);
        if (kind_ == WireVector::update)
            for (std::size_t i = 0; i < r.count; ++i) kept[i] = v[i] - arrived[i];
        else
            for (std::size_t i = 0; i < r.count; ++i) kept[i] += arrived[i];
        out.push_back(buffer.slice(offsets[f], used));
    }
    return out;
}

WireReceiver::WireReceiver(const CodecOptions& codec, WireVector kind, std::size_t n, std::size_t frame_elements)
    : codec_(make_codec(codec)), kind_(kind), n_(n), frame_elements_(frame_elements),
      copy_(kind == WireVector::state ? n : 0, 0.f), frame_(std::min(n, frame_elements)) {
    check_kind(kind, codec);
}

void WireReceiver::reset(const float* x) {
    if (kind_ == WireVector::state) std::copy(x, x + n_, copy_.begin());
}

void WireReceiver::decode(std::size_t frame, const std::uint8_t* bytes, std::size_t size, float* out) {
    if (frame >= frame_count(n_, frame_elements_))
        throw CodecError("frame " + std::to_string(frame) + " of a vector of " + std::to_string(frame_count(n_, frame_elements_)));
    const FrameRange r = frame_range(n_, frame_elements_, frame);
    codec_->decode(bytes, size, r.count, frame_.data());  // throws before anything is written
    if (kind_ == WireVector::state) {
        for (std::size_t i = 0; i < r.count; ++i) frame_[i] += copy_[r.first + i];
        // Each part was finite; their sum may still overflow.
        if (!host::all_finite(frame_.data(), r.count))
            throw CodecError("the change from the receiver's copy overflows float32");
    }
    std::copy(frame_.begin(), frame_.begin() + std::ptrdiff_t(r.count), out + r.first);
}

void WireReceiver::commit(const float* x) {
    if (kind_ == WireVector::state) std::copy(x, x + n_, copy_.begin());
}

}  // namespace tether
