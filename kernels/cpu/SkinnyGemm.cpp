//===- SkinnyGemm.cpp - Products of a few rows with a row-major B^T -------===//
//
// A decode step multiplies the few rows of its tokens (one per sequence) by every weight
// matrix, so its products are bound by reading the weights, not by arithmetic. BLAS packs the
// weights into panels first, which reads them at about a third of the memory's bandwidth; where
// B is read transposed (B[j] is row j of the matrix, as a tied embedding serves for the output
// head), each output is a dot product of two contiguous rows and needs no packing: this kernel
// reads each row of B once, from memory, and dots it with every row of A while it is in cache.
//
// Each element is Simd.h's dot16 of its two rows, so the result is the same at every vector
// width (the file is compiled once per instruction set, Isa.h) and for any number of threads
// (each thread takes whole columns).
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Simd.h"
#include "kernels/cpu/SmallGemm.h"

#include <omp.h>

#include <algorithm>

namespace tessel::cpu::isa_copy::TESSEL_CPU_ISA {

using detail::finishDot16;
using detail::kDotLanes;
using detail::kWideLanes;
using detail::loadWide;
using detail::BlockRange;
using detail::mulAdd;
using detail::smallGemm;
using detail::WideVec;

namespace {

/// Rows of A dotted with the rows of B at once: their running sums (eight vectors for each row
/// of B, at every width) stay in registers, and so do two rows of B where there are 32 vector
/// registers (AVX-512).
constexpr int64_t kRowsAtOnce = 8 / (kDotLanes / kWideLanes);
constexpr int64_t kColsAtOnce = kWideLanes == 16 ? 2 : 1;
/// Columns a thread takes at a time.
constexpr int64_t kColumnGrain = 64;
/// How far ahead, in rows of B, the kernel asks for B's next rows: the hardware prefetcher
/// alone leaves the product at about half the memory's bandwidth.
constexpr int64_t kPrefetchRows = 2;

/// C[i][j] = alpha * A[i]·B[j] + beta * C[i][j] for Rows rows of A and Cols rows of B.
template <int64_t Rows, int64_t Cols>
void dotBlock(const GemmArgs &g, const float *a, const float *b, float *c) {
  constexpr int kSums = kDotLanes / kWideLanes;
  WideVec sums[Cols][Rows][kSums] = {};
  int64_t i = 0;
  for (; i + kDotLanes <= g.k; i += kDotLanes) {
#pragma GCC unroll 2
    for (int64_t q = 0; q < Cols; ++q)
      __builtin_prefetch(b + (q + kPrefetchRows) * g.ldb + i);
#pragma GCC unroll 4
    for (int v = 0; v < kSums; ++v) {
      WideVec y[Cols];
#pragma GCC unroll 2
      for (int64_t q = 0; q < Cols; ++q)
        y[q] = loadWide(b + q * g.ldb + i + v * kWideLanes);
#pragma GCC unroll 8
      for (int64_t r = 0; r < Rows; ++r) {
        const WideVec x = loadWide(a + r * g.lda + i + v * kWideLanes);
#pragma GCC unroll 2
        for (int64_t q = 0; q < Cols; ++q)
          sums[q][r][v] = mulAdd(x, y[q], sums[q][r][v]);
      }
    }
  }
  for (int64_t q = 0; q < Cols; ++q)
    for (int64_t r = 0; r < Rows; ++r) {
      const float dot = finishDot16(sums[q][r], i, g.k, a + r * g.lda, b + q * g.ldb);
      float &out = c[r * g.ldc + q];
      out = g.beta == 0.0f ? g.alpha * dot : g.alpha * dot + g.beta * out;
    }
}

/// Columns [j, end) of C for every row of A.
template <int64_t Cols>
void dotColumns(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  int64_t i = 0;
  for (; i + kRowsAtOnce <= m; i += kRowsAtOnce)
    dotBlock<kRowsAtOnce, Cols>(g, a + i * g.lda, b, c + i * g.ldc);
  for (; i < m; ++i)
    dotBlock<1, Cols>(g, a + i * g.lda, b, c + i * g.ldc);
}

/// Rows of B the untransposed product reads in one pass over its columns.
constexpr int64_t kBandRows = 8;

} // namespace

void skinnyGemm(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  // smallGemm's register blocks, a band of kBandRows rows of B at a time: the band's rows are
  // read side by side along the columns, as few streams as the hardware prefetcher follows,
  // where one pass down all of k would jump a whole row of B at every step.
  const int64_t tasks = (g.n + kColumnGrain - 1) / kColumnGrain;
  const int64_t threads = std::min<int64_t>(omp_get_max_threads(), tasks);
  const int64_t perThread = (tasks + threads - 1) / threads;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && m * g.n * g.k >= (int64_t(1) << 20))
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t first = t * perThread * kColumnGrain;
    const int64_t end = std::min(g.n, first + perThread * kColumnGrain);
    if (first >= end)
      continue;
    for (int64_t k0 = 0; k0 < g.k; k0 += kBandRows) {
      const BlockRange band{end, k0, std::min(g.k, k0 + kBandRows), first};
      auto range = [&](int64_t, int64_t) { return band; };
      if (k0 == 0)
        smallGemm<false>(m, a, g.lda, b, g.ldb, c, g.ldc, range);
      else
        smallGemm<true>(m, a, g.lda, b, g.ldb, c, g.ldc, range);
    }
  }
}

void skinnyGemmTransB(const GemmArgs &g, int64_t m, const float *a, const float *b, float *c) {
  const int64_t tasks = (g.n + kColumnGrain - 1) / kColumnGrain;
#pragma omp parallel for schedule(static) if (tasks > 1 && m * g.n * g.k >= (int64_t(1) << 20))
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t end = std::min(g.n, (t + 1) * kColumnGrain);
    int64_t j = t * kColumnGrain;
    for (; j + kColsAtOnce <= end; j += kColsAtOnce)
      dotColumns<kColsAtOnce>(g, m, a, b + j * g.ldb, c + j);
    for (; j < end; ++j)
      dotColumns<1>(g, m, a, b + j * g.ldb, c + j);
  }
}

} // namespace tessel::cpu::isa_copy::TESSEL_CPU_ISA
