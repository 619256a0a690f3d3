//===- SmallGemm.h - Register-blocked products of small matrices -*- C++ -*-===//
//
// Private to kernels/cpu: the matrix products inside attention, where each (batch, head)
// pair multiplies matrices of a few dozen rows on one thread; a BLAS call per product would
// cost more in overhead (and must not run threaded inside an OpenMP region). Blocks of 4 rows
// (8 with AVX-512) by two vectors of columns live in registers, the vectors as wide as the
// instruction set the file is compiled for allows (4 floats on the baseline, 8 with AVX2, 16 with
// AVX-512); every element sums its k terms in increasing order in float with fused
// multiply-adds (Simd.h's mulAdd), the same way in the blocked and the tail loops and at every
// width, so the widths give the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_SMALLGEMM_H
#define TESSEL_KERNELS_CPU_SMALLGEMM_H

#include "kernels/cpu/Isa.h"
#include "kernels/cpu/Simd.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tessel::cpu::detail {
inline namespace TESSEL_CPU_ISA {

/// What a block of rows [rowBegin, rowEnd) needs: columns [colBegin, cols) and terms
/// [kBegin, kEnd).
/// Causal attention uses it to skip the keys after a block's last query.
struct BlockRange {
  int64_t cols, kBegin, kEnd;
  int64_t colBegin = 0; ///< Columns before it are left alone (keys before a sliding window).
};

/// Rows of a register block of two of the widest vectors (Simd.h): with AVX-512's 32 vector
/// registers, 8 rows.
constexpr int64_t kGemmRows = kWideLanes == 16 ? 8 : 4;

/// C[i][j] = (Accumulate ? C[i][j] : 0) + sum over k of A[i][k] B[k][j], for i < m and the
/// columns and terms `range(rowBegin, rowEnd)` gives each block of rows; other elements of C
/// are left alone. A, B and C are row-major with leading dimensions lda, ldb, ldc.
///
/// With TransA, A is read transposed: A[i][k] is a[k * lda + i] (the gradients of attention's
/// keys and values multiply the transposes of the probabilities and their gradients, read in
/// place). The sums are the same either way.
template <bool Accumulate, class Range, bool TransA = false>
void smallGemm(int64_t m, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
               int64_t ldc, Range range) {
  auto at = [a, lda](int64_t i, int64_t k) { return TransA ? a[k * lda + i] : a[i * lda + k]; };
  constexpr int64_t kRows = kGemmRows, kCols = 2 * kWideLanes;
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    const int64_t rows = std::min(kRows, m - i0);
    const BlockRange r = range(i0, i0 + rows);
    int64_t j = r.colBegin;
    if (rows == kRows) {
      for (; j + kCols <= r.cols; j += kCols) {
        WideVec s[kRows][2];
#pragma GCC unroll 16
        for (int64_t i = 0; i < kRows; ++i) {
          s[i][0] = Accumulate ? loadWide(c + (i0 + i) * ldc + j) : WideVec{};
          s[i][1] = Accumulate ? loadWide(c + (i0 + i) * ldc + j + kWideLanes) : WideVec{};
        }
        for (int64_t k = r.kBegin; k < r.kEnd; ++k) {
          const WideVec b0 = loadWide(b + k * ldb + j);
          const WideVec b1 = loadWide(b + k * ldb + j + kWideLanes);
#pragma GCC unroll 16
          for (int64_t i = 0; i < kRows; ++i) {
            const float x = at(i0 + i, k);
            s[i][0] = mulAdd(x, b0, s[i][0]);
            s[i][1] = mulAdd(x, b1, s[i][1]);
          }
        }
#pragma GCC unroll 16
        for (int64_t i = 0; i < kRows; ++i) {
          storeWide(c + (i0 + i) * ldc + j, s[i][0]);
          storeWide(c + (i0 + i) * ldc + j + kWideLanes, s[i][1]);
        }
      }
    }
    // The columns left over, and blocks of fewer than kRows rows: one row at a time.
    for (int64_t i = i0; i < i0 + rows; ++i) {
      float *ci = c + i * ldc;
      int64_t jj = j;
      for (; jj + kWideLanes <= r.cols; jj += kWideLanes) {
        WideVec s = Accumulate ? loadWide(ci + jj) : WideVec{};
        for (int64_t k = r.kBegin; k < r.kEnd; ++k)
          s = mulAdd(at(i, k), loadWide(b + k * ldb + jj), s);
        storeWide(ci + jj, s);
      }
      for (; jj + kLanes <= r.cols; jj += kLanes) {
        Vec s = Accumulate ? loadVec(ci + jj) : Vec{};
        for (int64_t k = r.kBegin; k < r.kEnd; ++k)
          s = mulAdd(at(i, k), loadVec(b + k * ldb + jj), s);
        storeVec(ci + jj, s);
      }
      for (; jj < r.cols; ++jj) {
        float s = Accumulate ? ci[jj] : 0.0f;
        for (int64_t k = r.kBegin; k < r.kEnd; ++k)
          s = mulAdd(at(i, k), b[k * ldb + jj], s);
        ci[jj] = s;
      }
    }
  }
}

/// out[j][i] = in[i][j] for i < rows, j < cols; in has leading dimension ldIn, out ldOut.
inline void transpose(int64_t rows, int64_t cols, const float *in, int64_t ldIn, float *out,
                      int64_t ldOut) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      out[j * ldOut + i] = in[i * ldIn + j];
}

} // namespace TESSEL_CPU_ISA
} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_SMALLGEMM_H
