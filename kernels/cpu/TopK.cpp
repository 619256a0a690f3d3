//===- TopK.cpp - The mask of each row's k largest entries ----------------===//
//
// A mixture of experts routes each token to the experts of its k largest router scores. The
// rows are short (one entry per expert), so each of the k picks scans the row for the largest
// entry not yet chosen; the order of the scan decides ties, so the mask never depends on the
// thread count or the instruction set.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include <cmath>

namespace tessel::cpu {

using detail::kParallelGrain;

namespace {

/// Whether `a` ranks before `b`: larger, with NaN above every number.
bool ranksBefore(float a, float b) {
  if (std::isnan(a))
    return !std::isnan(b);
  return !std::isnan(b) && a > b;
}

} // namespace

void topKMask(int64_t rows, int64_t cols, int64_t k, const float *x, float *y) {
#pragma omp parallel for schedule(static) if (rows * cols * k >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = 0.0f;
    for (int64_t pick = 0; pick < k; ++pick) {
      int64_t best = -1;
      for (int64_t j = 0; j < cols; ++j)
        if (yr[j] == 0.0f && (best < 0 || ranksBefore(xr[j], xr[best])))
          best = j;
      yr[best] = 1.0f;
    }
  }
}

} // namespace tessel::cpu
