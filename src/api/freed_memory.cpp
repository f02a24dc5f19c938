// keep_freed_memory_mapped() (tether.hpp): why and what it costs is said there.
#include <tether/tether.hpp>

#if defined(__GLIBC__) && __SIZEOF_POINTER__ == 8
#include <malloc.h>
#endif

namespace tether {

bool keep_freed_memory_mapped() {
// 64-bit glibc only: on 32-bit its largest mmap threshold is below the 32 MiB asked for here.
#if defined(__GLIBC__) && __SIZEOF_POINTER__ == 8
    // Both settings, or neither helps: a fixed M_TRIM_THRESHOLD alone turns off glibc's
    // adaptive mmap threshold, so every ~1 MB message is mmapped afresh, and a fixed mmap
    // threshold alone leaves the heap trimmed after each free (measured: experiments/README.md).
    // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; a 4 MiB frame
    // (cluster.chunk_elements) is well below it.
    constexpr int kMmapThreshold = 32 << 20, kTrimThreshold = 256 << 20;
    return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
    return false;
#endif
}

}  // namespace tether
