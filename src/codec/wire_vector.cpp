#include "codec/wire_vector.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "util/all_finite.hpp"

namespace tether {

namespace {

void check_kind(WireVector kind, const CodecOptions& codec) {
    if (kind != WireVector::state && kind != WireVector::update)
        throw std::logic_error(std::string("codec ") + to_string(codec.kind) +
                               ": the strategy does not say whether this vector is a state or an update");
    if (!lossy(codec.kind)) throw std::logic_error("float32 needs no wire state");
}

}  // namespace

WireSender::WireSender(const CodecOptions& codec, WireVector kind, std::size_t n)
    : codec_(make_codec(codec)), kind_(kind), n_(n), kept_(n, 0.f) {
    check_kind(kind, codec);
}

void WireSender::reset(const float* x) {
    if (kind_ == WireVector::state) std::copy(x, x + n_, kept_.begin());
    else std::fill(kept_.begin(), kept_.end(), 0.f);
}

std::size_t WireSender::encode(const float* x, std::size_t first, std::size_t count, std::uint8_t* out) {
    if (first > n_ || count > n_ - first) throw std::logic_error("a slice outside the vector");
    if (scratch_.size() < count) {  // once: every chunk but the last is as long as the first
        scratch_.resize(count);
        arrived_.resize(count);
    }
    float* kept = kept_.data() + first;
    float* v = scratch_.data();
    // What is sent: the update plus the residual, or the state's change from the copy.
    if (kind_ == WireVector::update)
        for (std::size_t i = 0; i < count; ++i) v[i] = x[first + i] + kept[i];
    else
        for (std::size_t i = 0; i < count; ++i) v[i] = x[first + i] - kept[i];
    const std::size_t used = codec_->encode(v, count, out);
    // What the receiver will read, decoded here from the same bytes.
    float* arrived = arrived_.data();
    codec_->decode(out, used, count, arrived);
    if (kind_ == WireVector::update)
        for (std::size_t i = 0; i < count; ++i) kept[i] = v[i] - arrived[i];
    else
        for (std::size_t i = 0; i < count; ++i) kept[i] += arrived[i];
    return used;
}

WireReceiver::WireReceiver(const CodecOptions& codec, WireVector kind, std::size_t n)
    : codec_(make_codec(codec)), kind_(kind), n_(n), copy_(kind == WireVector::state ? n : 0, 0.f) {
    check_kind(kind, codec);
}

void WireReceiver::reset(const float* x) {
    if (kind_ == WireVector::state) std::copy(x, x + n_, copy_.begin());
}

void WireReceiver::decode(const std::uint8_t* bytes, std::size_t size, std::size_t first, std::size_t count, float* out) {
    if (first > n_ || count > n_ - first)
        throw CodecError("elements [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of a vector of " +
                         std::to_string(n_));
    if (slice_.size() < count) slice_.resize(count);
    codec_->decode(bytes, size, count, slice_.data());  // throws before anything is written
    if (kind_ == WireVector::state) {
        for (std::size_t i = 0; i < count; ++i) slice_[i] += copy_[first + i];
        // Each part was finite; their sum may still overflow.
        if (!host::all_finite(slice_.data(), count)) throw CodecError("the change from the receiver's copy overflows float32");
    }
    std::copy(slice_.begin(), slice_.begin() + std::ptrdiff_t(count), out + first);
}

void WireReceiver::commit(const float* x) {
    if (kind_ == WireVector::state) std::copy(x, x + n_, copy_.begin());
}

}  // namespace tether
