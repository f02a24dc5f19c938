#include "protocol/framing.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "codec/wire_vector.hpp"
#include "util/all_finite.hpp"

namespace tether {

std::size_t chunk_count(std::size_t n, std::size_t chunk_elements) {
    return std::max<std::size_t>(1, (n + chunk_elements - 1) / chunk_elements);
}

ChunkRange chunk_range(std::size_t n, std::size_t chunk_elements, std::size_t chunk) {
    const std::size_t first = std::min(n, chunk * chunk_elements);
    return {first, std::min(chunk_elements, n - first)};
}

Dtype dtype_of(CodecKind kind) {
    switch (kind) {
        case CodecKind::float32: return Dtype::float32;
        case CodecKind::fp16: return Dtype::fp16;
        case CodecKind::bf16: return Dtype::bf16;
        case CodecKind::int8: return Dtype::int8;
        case CodecKind::topk: return Dtype::topk;
        case CodecKind::int4: return Dtype::int4;
    }
    throw std::invalid_argument("unknown codec");
}

std::size_t max_payload_bytes(const CodecOptions& codec, std::size_t chunk_elements) {
    return std::max(chunk_elements * sizeof(float), make_codec(codec)->max_encoded_bytes(chunk_elements));
}

std::uint32_t chunk_flags(const ChunkFormat& format) {
    return lossy(format.codec.kind) && format.kind == WireVector::state ? kFlagChangeFromCopy : 0;
}

ChunkSender::ChunkSender(const ChunkFormat& format) : format_(format) {
    if (lossy(format.codec.kind)) encoder_ = std::make_unique<WireSender>(format.codec, format.kind, format.elements);
}

ChunkSender::~ChunkSender() = default;

void ChunkSender::reset(const float* x) {
    if (encoder_) encoder_->reset(x);
}

std::vector<Payload> ChunkSender::encode(const float* x) {
    const std::size_t n = format_.elements, e = format_.chunk_elements, chunks = chunk_count(n, e);
    std::vector<std::size_t> offsets{0};
    for (std::size_t k = 0; k < chunks; ++k) offsets.push_back(offsets.back() + encoder_->max_encoded_bytes(chunk_range(n, e, k).count));
    // The last vector's buffer once ZeroMQ has let go of it: a fresh one of this size each
    // time would cost page faults on every exchange.
    if (!(buffer_.unique() && buffer_.size() >= offsets.back())) buffer_ = Payload::allocate(offsets.back());
    std::vector<Payload> out;
    for (std::size_t k = 0; k < chunks; ++k) {
        const ChunkRange r = chunk_range(n, e, k);
        const std::size_t used = encoder_->encode(x, r.first, r.count, buffer_.data() + offsets[k]);
        out.push_back(buffer_.slice(offsets[k], used));
    }
    return out;
}

ChunkAssembler::ChunkAssembler(const ChunkFormat& format, std::string what, std::string codec_key, bool refuse_non_finite,
                               bool streams)
    : format_(format), what_(std::move(what)), codec_key_(std::move(codec_key)), refuse_non_finite_(refuse_non_finite),
      streams_(streams && !lossy(format.codec.kind)), dtype_(dtype_of(format.codec.kind)), flags_(chunk_flags(format)),
      chunks_(std::uint32_t(chunk_count(format.elements, format.chunk_elements))) {
    if (lossy(format.codec.kind)) decoder_ = std::make_unique<WireReceiver>(format.codec, format.kind, format.elements);
}

ChunkAssembler::~ChunkAssembler() = default;
ChunkAssembler::ChunkAssembler(ChunkAssembler&&) noexcept = default;

void ChunkAssembler::reset(const float* x) {
    if (decoder_) decoder_->reset(x);
}

ChunkAssembler::Result ChunkAssembler::refuse(ErrorCode code, std::string detail) {
    drop();  // the partial vector goes whole
    refusal_ = {code, std::move(detail)};
    return Result::refused;
}

void ChunkAssembler::drop() {
    next_ = 0;
    vector_ = Payload();
    piece_ = ChunkPiece();
}

Payload ChunkAssembler::take() {
    Payload out = std::move(vector_);
    vector_ = Payload();
    return out;
}

ChunkAssembler::Result ChunkAssembler::add(const Header& h, const Payload& payload) {
    if (h.dtype != dtype_)
        return refuse(ErrorCode::wrong_dtype, what_ + " payloads of this run are " + to_string(dtype_) +
                                         (codec_key_.empty() ? "" : " (" + codec_key_ + ")") + ", got " + to_string(h.dtype));
    if (h.chunk_count != chunks_)
        return refuse(ErrorCode::wrong_chunk_count, "expected " + std::to_string(chunks_) + ", got " + std::to_string(h.chunk_count));
    if (h.chunk_index != next_)
        return refuse(ErrorCode::chunk_out_of_order, "expected chunk " + std::to_string(next_) + ", got " + std::to_string(h.chunk_index));
    const ChunkRange r = chunk_range(format_.elements, format_.chunk_elements, h.chunk_index);
    if (h.element_count != r.count)
        return refuse(ErrorCode::wrong_count, "chunk " + std::to_string(h.chunk_index) + " holds " + std::to_string(r.count) +
                                         " elements, message says " + std::to_string(h.element_count));
    if ((h.flags & kFlagChangeFromCopy) != flags_)
        return refuse(ErrorCode::wrong_encoding, "this run's " + what_ + " payloads are " +
                                            (flags_ ? "changes from the receiver's copy" : "values, not changes") + " (flag bit 1)");
    const std::size_t bytes = format_.elements * sizeof(float);
    if (!decoder_) {
        if (payload.size() != r.count * sizeof(float))
            return refuse(ErrorCode::wrong_size, "payload of " + std::to_string(payload.size()) + " bytes for " +
                                            std::to_string(r.count) + " float32 elements");
        if (refuse_non_finite_ && !host::all_finite(payload.floats(), r.count))
            return refuse(ErrorCode::non_finite_payload, "the " + what_ + " holds NaN or Inf");
        if (streams_) {
            piece_ = {payload, r.first, r.count, h.chunk_index + 1 == chunks_};
            next_ = piece_.last ? 0 : next_ + 1;
            return Result::piece;
        }
        if (chunks_ == 1) {
            vector_ = payload;  // adopted: no copy
            return Result::complete;
        }
    }
    if (h.chunk_index == 0) vector_ = buffers_.next(bytes);
    if (decoder_) {
        try {
            decoder_->decode(payload.data(), payload.size(), r.first, r.count, vector_.floats());
        } catch (const CodecError& e) {
            return refuse(ErrorCode::bad_encoding, e.what());
        }
    } else {
        std::memcpy(vector_.floats() + r.first, payload.data(), payload.size());
    }
    if (++next_ < chunks_) return Result::partial;
    next_ = 0;
    if (decoder_) decoder_->commit(vector_.floats());
    return Result::complete;
}

}  // namespace tether
