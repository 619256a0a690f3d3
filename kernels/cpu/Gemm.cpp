//===- Gemm.cpp - Batched matrix products through cblas_sgemm -------------===//

#include "kernels/cpu/CpuKernels.h"

#include <cblas.h>

namespace tessel::cpu {

namespace {

/// OpenBLAS (0.3.21, interface/gemm.c) runs a product on one thread when m * n * k is at most
/// 65536 * GEMM_MULTITHREAD_THRESHOLD (4). Batches of such products are split over OpenMP
/// threads instead; larger ones run one after another on OpenBLAS's own threads, which must
/// not be entered from several threads at once.
constexpr double kSingleThreadedWork = 65536.0 * 4.0;

void sgemm(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
              g.transB ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(g.n),
              static_cast<int>(g.k), g.alpha, a, static_cast<int>(g.lda), b,
              static_cast<int>(g.ldb), g.beta, c, static_cast<int>(g.ldc));
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
  // A batch of row-major A blocks against one shared B, writing contiguous C blocks, is one
  // product with batch * m rows (the [batch, seq, embed] x [embed, out] of every linear layer).
  if (g.batch > 1 && g.strideB == 0 && !g.transA && g.strideA == g.m * g.lda &&
      g.strideC == g.m * g.ldc)
    return sgemm(g, g.batch * g.m, a, b, c);
  const double work = static_cast<double>(g.m) * g.n * g.k;
  // With strideC == 0 every batch writes the same C, so the order of the batches matters.
  const bool parallel = g.batch > 1 && work <= kSingleThreadedWork && g.strideC != 0;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t bi = 0; bi < g.batch; ++bi)
    sgemm(g, g.m, a + bi * g.strideA, b + bi * g.strideB, c + bi * g.strideC);
}

} // namespace tessel::cpu
