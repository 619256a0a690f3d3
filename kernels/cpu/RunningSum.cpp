//===- RunningSum.cpp - Sums over each sequence's earlier tokens ----------===//
//
// The decode programs' form of a contraction with the mask of earlier positions (a mixture of
// experts counting the tokens each expert took before a token): the sum so far of each
// sequence lives in a row of `totals`, carried from one decode call to the next.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"

#include <algorithm>

namespace tessel::cpu {

void runningSum(const RunningSumArgs &a, const float *x, const int32_t *positions,
                const int32_t *blockTable, float *y, float *totals) {
#pragma omp parallel for schedule(static) if (a.batch > 1)
  for (int64_t b = 0; b < a.batch; ++b) {
    const int32_t *pos = positions + b * a.seq;
    const int32_t block = blockTable[b * a.maxBlocks];
    float *sum = block >= 0 && block < a.blocks ? totals + block * a.width : nullptr;
    const int32_t *first = std::find_if(pos, pos + a.seq, [](int32_t p) { return p >= 0; });
    if (sum && first != pos + a.seq && *first == 0)
      std::fill(sum, sum + a.width, 0.0f);
    for (int64_t s = 0; s < a.seq; ++s) {
      const float *xs = x + (b * a.seq + s) * a.width;
      float *ys = y + (b * a.seq + s) * a.width;
      if (!sum || pos[s] < 0) {
        std::fill(ys, ys + a.width, -1.0f);
        continue;
      }
      for (int64_t j = 0; j < a.width; ++j) {
        if (a.inclusive)
          sum[j] += xs[j];
        ys[j] = sum[j];
        if (!a.inclusive)
          sum[j] += xs[j];
      }
    }
  }
}

} // namespace tessel::cpu
