// TETHER_CLONES: compile a function once per x86-64 level (AVX-512, AVX2, baseline) and let
// the loader pick the widest the machine has, so a portable binary (built for x86-64-v2) still
// runs its memory-bound loops on the widest vectors. Elsewhere it compiles the function once.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define TETHER_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TETHER_CLONES
#endif
