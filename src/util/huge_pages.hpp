// Large buffers that a loader fills in one pass (a data set's pixels: 188 MB of floats for
// Fashion-MNIST), asked to be backed by 2 MB pages before anything touches them. On a virtual
// machine each 4 KB page fault is expensive: filling Fashion-MNIST's file bytes and images took
// tens of thousands of faults and most of tether-bench's start-up, which 2 MB pages cut by
// half or more (measured: experiments/README.md). Where the kernel's transparent huge pages are off
// (`never` in /sys/kernel/mm/transparent_hugepage/enabled) the request is ignored and nothing
// else changes; with `always` it is already the default.
#pragma once

#include <cstddef>
#include <vector>

namespace tether {

// Asks for 2 MB pages over the whole 2 MB-aligned pages inside [data, data + bytes); a hint only.
void advise_huge_pages(const void* data, std::size_t bytes);

// v.reserve(n), with the new storage advised before the caller's resize() first touches it.
template <typename T>
void reserve_in_huge_pages(std::vector<T>& v, std::size_t n) {
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
}

}  // namespace tether
