#include "protocol/header.hpp"

namespace tether {

const char* to_string(MessageType type) {
    switch (type) {
        case MessageType::hello: return "hello";
        case MessageType::welcome: return "welcome";
        case MessageType::exchange: return "exchange";
        case MessageType::reply: return "reply";
        case MessageType::heartbeat: return "heartbeat";
        case MessageType::bye: return "bye";
        case MessageType::error: return "error";
        case MessageType::snapshot: return "snapshot";
        case MessageType::buffers: return "buffers";
        case MessageType::log: return "log";
        case MessageType::settings: return "settings";
        case MessageType::token: return "token";
        case MessageType::servers: return "servers";
        case MessageType::lease: return "lease";
    }
    return "unknown";
}

const char* to_string(Dtype dtype) {
    switch (dtype) {
        case Dtype::none: return "none";
        case Dtype::float32: return "float32";
        case Dtype::utf8: return "utf8";
        case Dtype::fp16: return "fp16";
        case Dtype::bf16: return "bf16";
        case Dtype::int8: return "int8";
        case Dtype::topk: return "topk";
        case Dtype::int4: return "int4";
    }
    return "unknown";
}

namespace {

class Writer {
public:
    explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}
    template <typename T>
    void put(T value) {
        for (std::size_t i = 0; i < sizeof(T); ++i) out_.push_back(std::uint8_t(std::uint64_t(value) >> (8 * i)));
    }

private:
    std::vector<std::uint8_t>& out_;
};

class Reader {
public:
    explicit Reader(const std::uint8_t* p) : p_(p) {}
    template <typename T>
    T get() {
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) v |= std::uint64_t(p_[i]) << (8 * i);
        p_ += sizeof(T);
        return T(v);
    }

private:
    const std::uint8_t* p_;
};

}  // namespace

std::vector<std::uint8_t> encode(const Header& h) {
    std::vector<std::uint8_t> out;
    out.reserve(kHeaderBytes);
    Writer w(out);
    w.put<std::uint32_t>(kProtocolMagic);
    w.put<std::uint16_t>(kProtocolVersion);
    w.put<std::uint8_t>(std::uint8_t(h.type));
    w.put<std::uint8_t>(std::uint8_t(h.dtype));
    w.put<std::uint32_t>(h.worker_id);
    w.put<std::uint32_t>(h.flags);
    w.put<std::uint64_t>(h.sequence);
    w.put<std::uint64_t>(h.center_version);
    w.put<std::uint64_t>(h.local_step);
    w.put<std::uint64_t>(h.samples);
    w.put<std::uint32_t>(h.chunk_index);
    w.put<std::uint32_t>(h.chunk_count);
    w.put<std::uint64_t>(h.element_count);
    w.put<std::uint64_t>(h.fingerprint);
    w.put<std::uint64_t>(std::uint64_t(h.error_code));
    return out;
}

std::optional<Header> decode(const std::uint8_t* bytes, std::size_t size, ErrorCode& why) {
    if (size < kHeaderBytes) {
        why = ErrorCode::short_header;
        return std::nullopt;
    }
    if (size > kHeaderBytes) {
        why = ErrorCode::long_header;
        return std::nullopt;
    }
    Reader r(bytes);
    if (r.get<std::uint32_t>() != kProtocolMagic) {
        why = ErrorCode::bad_magic;
        return std::nullopt;
    }
    if (r.get<std::uint16_t>() != kProtocolVersion) {
        why = ErrorCode::protocol_version;
        return std::nullopt;
    }
    Header h;
    const auto type = r.get<std::uint8_t>();
    if (type < std::uint8_t(MessageType::hello) || type > std::uint8_t(MessageType::lease)) {
        why = ErrorCode::unknown_type;
        return std::nullopt;
    }
    h.type = MessageType(type);
    const auto dtype = r.get<std::uint8_t>();
    if (dtype > kLastDtype) {
        why = ErrorCode::unknown_dtype;
        return std::nullopt;
    }
    h.dtype = Dtype(dtype);
    h.worker_id = r.get<std::uint32_t>();
    h.flags = r.get<std::uint32_t>();
    h.sequence = r.get<std::uint64_t>();
    h.center_version = r.get<std::uint64_t>();
    h.local_step = r.get<std::uint64_t>();
    h.samples = r.get<std::uint64_t>();
    h.chunk_index = r.get<std::uint32_t>();
    h.chunk_count = r.get<std::uint32_t>();
    h.element_count = r.get<std::uint64_t>();
    h.fingerprint = r.get<std::uint64_t>();
    const auto code = r.get<std::uint64_t>();
    if (h.chunk_count == 0 || h.chunk_index >= h.chunk_count) {
        why = ErrorCode::bad_chunk;
        return std::nullopt;
    }
    // Peers of one protocol version share one table of codes: any other is malformed, so that a
    // header decodes only to what encode() writes.
    if (code > kLastErrorCode) {
        why = ErrorCode::unknown_error_code;
        return std::nullopt;
    }
    h.error_code = ErrorCode(code);
    return h;
}

}  // namespace tether
