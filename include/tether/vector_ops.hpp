// The vector operations a WorkerRule (strategy.hpp) may use on a worker's memory. A worker's
// parameters x_i live where it computes: host memory, or GPU memory with the CUDA backend. A
// rule therefore never loops over x_i itself; it calls these, and tether runs them on the
// worker's device (Thrust on OpenMP threads, or CUDA kernels on tether's stream).
//
// Pointers passed here are x_i, the rule's own DeviceBuffers, or (for the *_host arguments)
// ordinary host memory. Operations are ordered as issued; synchronize() waits for all of them.
#pragma once

#include <cstddef>
#include <utility>

namespace tether {

class VectorOps {
public:
    virtual ~VectorOps() = default;

    // Memory on the worker's device (host_addressable(): plain host memory).
    virtual void* allocate_bytes(std::size_t bytes) = 0;
    virtual void release_bytes(void* pointer) = 0;
    virtual void copy_from_host(void* destination, const void* host_source, std::size_t bytes) = 0;
    virtual void copy_to_host(void* host_destination, const void* source, std::size_t bytes) = 0;
    virtual void copy(void* destination, const void* source, std::size_t bytes) = 0;
    // Waits until every operation issued so far has finished (a no-op on the CPU).
    virtual void synchronize() = 0;
    // True when device memory is host memory: a rule may then compute straight into a host
    // buffer (the payload) instead of computing on the device and copying it down.
    virtual bool host_addressable() const = 0;

    // Element-wise algebra on n floats. `out`, `y` may be an input of the same call (the same
    // pointer); vectors that overlap only in part are not allowed.
    virtual void fill(float* x, std::size_t n, float value) = 0;
    virtual void scale(float* x, std::size_t n, float a) = 0;                                 // x <- a x
    virtual void axpy(float* y, const float* x, std::size_t n, float a) = 0;                  // y <- y + a x
    // out <- a - b. On the CPU, 64k+ floats into a buffer other than a and b are written around
    // the caches, as for a message another thread sends: reading `out` back at once costs more.
    virtual void difference(float* out, const float* a, const float* b, std::size_t n) = 0;
    virtual double sum_of_squares(const float* x, std::size_t n) = 0;
    virtual bool all_finite(const float* x, std::size_t n) = 0;  // no NaN, no +-Inf
};

// Owns `count` elements of T in a worker's device memory (a rule's state: x_pull, scratch).
template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(VectorOps& ops, std::size_t count)
        : ops_(&ops), count_(count), data_(count ? static_cast<T*>(ops.allocate_bytes(count * sizeof(T))) : nullptr) {}
    ~DeviceBuffer() { reset(); }
    DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        if (this != &other) {
            reset();
            ops_ = other.ops_;
            count_ = other.count_;
            data_ = other.data_;
            other.data_ = nullptr;
            other.count_ = 0;
        }
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    T* data() { return data_; }
    const T* data() const { return data_; }
    std::size_t size() const { return count_; }

    void upload(const T* host, std::size_t count) { ops_->copy_from_host(data_, host, count * sizeof(T)); }
    void download(T* host, std::size_t count) const { ops_->copy_to_host(host, data_, count * sizeof(T)); }

private:
    void reset() {
        if (data_) ops_->release_bytes(data_);
        data_ = nullptr;
        count_ = 0;
    }
    VectorOps* ops_ = nullptr;
    std::size_t count_ = 0;
    T* data_ = nullptr;
};

}  // namespace tether
