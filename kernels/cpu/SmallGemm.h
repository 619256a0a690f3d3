//===- SmallGemm.h - Register-blocked products of small matrices -*- C++ -*-===//
//
// Private to kernels/cpu: the matrix products inside attention, where each (batch, head)
// pair multiplies matrices of a few dozen rows on one thread; a BLAS call per product would
// cost more in overhead (and must not run threaded inside an OpenMP region). Blocks of 4 rows
// by 8 columns live in vector registers; every element sums its k terms in increasing order
// in float, the same way in the blocked and the tail loops.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_SMALLGEMM_H
#define TESSEL_KERNELS_CPU_SMALLGEMM_H

#include "kernels/cpu/Simd.h"

#include <algorithm>
#include <cstdint>

namespace tessel::cpu::detail {

/// What a block of rows [rowBegin, rowEnd) needs: columns [0, cols) and terms [kBegin, kEnd).
/// Causal attention uses it to skip the keys after a block's last query.
struct BlockRange {
  int64_t cols, kBegin, kEnd;
};

/// C[i][j] = (Accumulate ? C[i][j] : 0) + sum over k of A[i][k] B[k][j], for i < m and the
/// columns and terms `range(rowBegin, rowEnd)` gives each block of rows; other elements of C
/// are left alone. A, B and C are row-major with leading dimensions lda, ldb, ldc.
template <bool Accumulate, class Range>
void smallGemm(int64_t m, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
               int64_t ldc, Range range) {
  constexpr int64_t kRows = 4, kCols = 2 * kLanes;
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    const int64_t rows = std::min(kRows, m - i0);
    const BlockRange r = range(i0, i0 + rows);
    int64_t j = 0;
    if (rows == kRows) {
      const float *a0 = a + i0 * lda, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
      float *c0 = c + i0 * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
      for (; j + kCols <= r.cols; j += kCols) {
        Vec s00 = {}, s01 = {}, s10 = {}, s11 = {}, s20 = {}, s21 = {}, s30 = {}, s31 = {};
        if (Accumulate) {
          s00 = loadVec(c0 + j), s01 = loadVec(c0 + j + kLanes);
          s10 = loadVec(c1 + j), s11 = loadVec(c1 + j + kLanes);
          s20 = loadVec(c2 + j), s21 = loadVec(c2 + j + kLanes);
          s30 = loadVec(c3 + j), s31 = loadVec(c3 + j + kLanes);
        }
        for (int64_t k = r.kBegin; k < r.kEnd; ++k) {
          const Vec b0 = loadVec(b + k * ldb + j), b1 = loadVec(b + k * ldb + j + kLanes);
          const float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
          s00 += x0 * b0;
          s01 += x0 * b1;
          s10 += x1 * b0;
          s11 += x1 * b1;
          s20 += x2 * b0;
          s21 += x2 * b1;
          s30 += x3 * b0;
          s31 += x3 * b1;
        }
        storeVec(c0 + j, s00), storeVec(c0 + j + kLanes, s01);
        storeVec(c1 + j, s10), storeVec(c1 + j + kLanes, s11);
        storeVec(c2 + j, s20), storeVec(c2 + j + kLanes, s21);
        storeVec(c3 + j, s30), storeVec(c3 + j + kLanes, s31);
      }
    }
    // The columns left over, and blocks of fewer than four rows: one row at a time.
    for (int64_t i = i0; i < i0 + rows; ++i) {
      const float *ai = a + i * lda;
      float *ci = c + i * ldc;
      int64_t jj = j;
      for (; jj + kLanes <= r.cols; jj += kLanes) {
        Vec s = Accumulate ? loadVec(ci + jj) : Vec{};
        for (int64_t k = r.kBegin; k < r.kEnd; ++k)
          s += ai[k] * loadVec(b + k * ldb + jj);
        storeVec(ci + jj, s);
      }
      for (; jj < r.cols; ++jj) {
        float s = Accumulate ? ci[jj] : 0.0f;
        for (int64_t k = r.kBegin; k < r.kEnd; ++k)
          s += ai[k] * b[k * ldb + jj];
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

} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_SMALLGEMM_H
