#pragma once

#include <memory>
#include <string>

#include "backend/backend.hpp"

namespace tether {

// threads <= 0 means one per hardware thread. `flush_denormals`: see BackendOptions.
std::unique_ptr<Backend> make_cpu_backend(int threads, bool flush_denormals = false);

// OpenBLAS keeps one process-wide thread count; callers running several workers in one
// process set it to 1 so the workers' GEMMs do not oversubscribe the cores. With
// `flush_denormals` the calling thread flushes denormals and OpenBLAS's own threads are made
// to as well (see cpu_backend.cpp): only from a thread tether owns, before training starts.
void set_blas_threads(int threads, bool flush_denormals);
int blas_threads();
// The kernels OpenBLAS picked for this processor, as it names them ("Haswell", "Cooperlake"):
// its own choice, or the user's through OPENBLAS_CORETYPE. Printed with the thread plan, as
// it sets the GEMMs' speed (on a Zen 5 the default MLP trained 1.6 times as fast with
// Cooperlake's kernels as with Haswell's; measured: experiments/README.md).
std::string blas_core();

// Row-major C[m x n] = op(A) op(B) + beta C on blocks of larger matrices (leading dimensions
// lda, ldb, ldc), on the calling thread's share of OpenBLAS: what a layer split between
// threads computes (train/layer_split.hpp). k = 0 leaves beta C (zeros for beta = 0).
void cpu_gemm(bool transpose_a, bool transpose_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
              float beta, float* c, int ldc);

}  // namespace tether
