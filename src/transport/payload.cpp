#include "transport/payload.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace tether {

Payload Payload::allocate(std::size_t bytes, std::size_t alignment) {
    // 64-byte alignment keeps the center's loops on whole cache lines and vector registers.
    void* memory = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment + (bytes == 0 ? alignment : 0));
    if (!memory) throw std::bad_alloc();
    return Payload(std::shared_ptr<void>(memory, std::free), static_cast<std::uint8_t*>(memory), bytes);
}

Payload& RecycledPayloads::next(std::size_t bytes) {
    for (std::size_t k = 1; k <= 2; ++k) {
        const std::size_t slot = (last_ + k) % 2;
        if (slots_[slot].unique() && slots_[slot].size() == bytes) {
            // use_count() is a relaxed read: order the refill after the last holder's reads
            // (ZeroMQ's I/O thread letting go of a buffer it sent).
            std::atomic_thread_fence(std::memory_order_acquire);
            last_ = slot;
            return slots_[slot];
        }
    }
    last_ = (last_ + 1) % 2;
    slots_[last_] = allocate_(bytes);
    return slots_[last_];
}

}  // namespace tether
