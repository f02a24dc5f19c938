// A message payload that crosses the transport without being copied: a received ZeroMQ frame
// adopted as it is, or a buffer the sender filled. Ownership is shared, so one reply can go to
// many workers, a slice can go out as one chunk, and a zero-copy send completes on ZeroMQ's
// I/O thread after the caller has moved on; the bytes live until the last holder lets go.
// Whoever hands a Payload to send() must not write to it again (the receiver may be reading
// it, over inproc:// even in place).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace tether {

class Payload {
public:
    Payload() = default;
    // `owner` keeps [data, data + size) alive.
    Payload(std::shared_ptr<void> owner, std::uint8_t* data, std::size_t size)
        : owner_(std::move(owner)), data_(data), size_(size) {}

    // A new buffer of `bytes` uninitialized bytes, aligned for vector loops (or to `alignment`,
    // a power of two, its size rounded up to a multiple of it).
    static Payload allocate(std::size_t bytes, std::size_t alignment = 64);

    std::uint8_t* data() const { return data_; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    const std::uint8_t* begin() const { return data_; }
    const std::uint8_t* end() const { return data_ + size_; }
    float* floats() const { return reinterpret_cast<float*>(data_); }
    // The floats, sharing this payload's ownership: a holder keeps them alive.
    std::shared_ptr<const float> shared_floats() const { return {owner_, floats()}; }

    // Bytes [offset, offset + bytes) of this payload, sharing its ownership.
    Payload slice(std::size_t offset, std::size_t bytes) const { return Payload(owner_, data_ + offset, bytes); }
    // True when nobody else (a queued send, a slice) still holds these bytes: safe to refill.
    bool unique() const { return owner_ && owner_.use_count() == 1; }
    const std::shared_ptr<void>& owner() const { return owner_; }

private:
    std::shared_ptr<void> owner_;
    std::uint8_t* data_ = nullptr;
    std::size_t size_ = 0;
};

// Two message buffers of one size, handed out in turn for refilling. A buffer is refilled only
// once every holder has let go of it (ZeroMQ until it has sent it; over inproc:// the receiver,
// such as the center that answers in it; a worker rule that keeps a reply as its x_pull). The
// one handed out last is often still held, and the other one is then free: a new buffer (a
// fresh ~1 MB costs page faults) is allocated only when both are held.
class RecycledPayloads {
public:
    Payload& next(std::size_t bytes);
    // How a new buffer is made (default Payload::allocate): a GPU worker's are page-locked.
    void allocate_with(std::function<Payload(std::size_t bytes)> allocate) { allocate_ = std::move(allocate); }

private:
    Payload slots_[2];
    std::size_t last_ = 1;
    std::function<Payload(std::size_t)> allocate_ = [](std::size_t bytes) { return Payload::allocate(bytes); };
};

}  // namespace tether
