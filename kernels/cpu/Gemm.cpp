//===- Gemm.cpp - Batched matrix products through cblas_sgemm -------------===//
//
// Products of a few rows with B read transposed take SkinnyGemm.cpp's dot products instead.
//
// Threads: every kernel runs on OpenMP's threads, and gemm too: it splits a product into a
// fixed number of row or column slices (a function of the shape alone) and runs each slice as
// a one-threaded cblas_sgemm. OpenBLAS's own thread pool is kept at one thread: its workers
// spin between calls, and on a machine with as many threads as cores they would take the cores
// from the OpenMP kernels that run between products. Since a slice's result does not depend on
// which thread runs it, the bits do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"

#ifdef TESSEL_HAVE_BLAS
#include <cblas.h>
#endif

#include <algorithm>

namespace tessel::cpu {

namespace {

/// Products below this many multiply-adds run as one call: slicing them costs more in
/// repacked operands than a second thread gains.
constexpr int64_t kSliceWork = int64_t(1) << 21;
/// Slices per product, at most; and the smallest slice, in rows or columns.
constexpr int64_t kMaxSlices = 8;
constexpr int64_t kMinSlice = 64;
/// Products of a few rows take the dot-product path from this many terms (shorter rows gain
/// nothing from it).
constexpr int64_t kSkinnyMinK = 64;
/// With B read in place, from this many columns: narrower rows of B are too short a stream for
/// the bands to beat BLAS's packing.
constexpr int64_t kSkinnyMinN = 2048;

#ifdef TESSEL_HAVE_BLAS
void sgemm(const GemmArgs &g, int64_t m, int64_t n, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(g.k), g.alpha, a, static_cast<int>(g.lda), b,
              static_cast<int>(g.ldb), g.beta, c, static_cast<int>(g.ldc));
}
#else
/// Without a BLAS (a runner built for a GPU machine, whose CPU backend is only a reference):
/// the product in plain loops, each element summing its k terms in order.
void sgemm(const GemmArgs &g, int64_t m, int64_t n, const float *a, const float *b, float *c) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t k = 0; k < g.k; ++k)
        s += (g.transA ? a[k * g.lda + i] : a[i * g.lda + k]) *
             (g.transB ? b[j * g.ldb + k] : b[k * g.ldb + j]);
      float &out = c[i * g.ldc + j];
      out = g.alpha * s + (g.beta == 0.0f ? 0.0f : g.beta * out);
    }
}
#endif

/// One product with m rows, split into slices over the larger of m and n.
void sliced(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  // A few rows against B^T read in place: each output a dot product of contiguous rows, which
  // reads B at the memory's bandwidth where BLAS would pack it first.
  if (m <= kSkinnyRows && !g.transA && g.k >= kSkinnyMinK) {
    if (g.transB)
      return skinnyGemmTransB(g, m, a, b, c);
    if (g.alpha == 1.0f && g.beta == 0.0f && g.n >= kSkinnyMinN)
      return skinnyGemm(g, m, a, b, c);
  }
  const bool byRows = m >= g.n;
  const int64_t extent = byRows ? m : g.n;
  int64_t slices = 1;
  if (m * g.n * g.k >= kSliceWork)
    slices = std::max<int64_t>(1, std::min(kMaxSlices, extent / kMinSlice));
  // Slices are whole multiples of 16 rows or columns (OpenBLAS's register blocks), but the last.
  const int64_t size = ((extent + slices - 1) / slices + 15) / 16 * 16;
  slices = (extent + size - 1) / size;
#pragma omp parallel for schedule(static) if (slices > 1)
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t first = s * size, count = std::min(size, extent - first);
    if (byRows)
      sgemm(g, count, g.n, a + (g.transA ? first : first * g.lda), b, c + first * g.ldc);
    else
      sgemm(g, m, count, a, b + (g.transB ? first * g.ldb : first), c + first);
  }
}

/// C = beta * C, for an empty contraction (k == 0), which BLAS implementations treat unevenly.
void scaleOnly(const GemmArgs &g, float *c) {
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i) {
      float *row = c + bi * g.strideC + i * g.ldc;
      for (int64_t j = 0; j < g.n; ++j)
        row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
    }
}

} // namespace

void gemm(const GemmArgs &g, const float *a, const float *b, float *c) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0)
    return;
  if (g.k <= 0)
    return scaleOnly(g, c);
#ifdef TESSEL_HAVE_BLAS
  if (openblas_get_num_threads() != 1)
    openblas_set_num_threads(1);
#endif
  // A batch of row-major A blocks against one shared B, writing contiguous C blocks, is one
  // product with batch * m rows (the [batch, seq, embed] x [embed, out] of every linear layer).
  if (g.batch > 1 && g.strideB == 0 && !g.transA && g.strideA == g.m * g.lda &&
      g.strideC == g.m * g.ldc)
    return sliced(g, g.batch * g.m, a, b, c);
  // With strideC == 0 every batch writes the same C, so the batches run in order; a few large
  // products also run in order, each split over the threads.
  const bool fewLarge = g.batch < 4 && g.m * g.n * g.k >= kSliceWork;
  if (g.batch == 1 || g.strideC == 0 || fewLarge) {
    for (int64_t bi = 0; bi < g.batch; ++bi)
      sliced(g, g.m, a + bi * g.strideA, b + bi * g.strideB, c + bi * g.strideC);
    return;
  }
  // Many independent products: one per task.
#pragma omp parallel for schedule(static)
  for (int64_t bi = 0; bi < g.batch; ++bi)
    sgemm(g, g.m, g.n, a + bi * g.strideA, b + bi * g.strideB, c + bi * g.strideC);
}

} // namespace tessel::cpu
