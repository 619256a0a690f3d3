//===- ShardedLoss.cpp - Cross entropy over a split class dim -------------===//
//
// When the classes of a [rows, classes] logits tensor are split over ranks, each rank holds
// `cols` of them starting at column `first`. The loss then takes three steps with collectives
// between them: the row maxima (all-reduced with max), each rank's sums of exp(x - max) and
// target logits (all-reduced with sum), and the loss from those. The per-row arithmetic is
// that of crossEntropy/crossEntropyGrad (the same exp, sums in double), so the split loss
// agrees with the whole one to rounding. A row whose target is ignored (kIgnoredTarget) gets
// s = t = 0 from every rank, which tells ceLoss to skip it, and a zero gradient.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Ids.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::cpu {

using detail::kParallelGrain;

void ceMax(int64_t rows, int64_t cols, const float *logits, float *m) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r)
    m[r] = detail::maxOf(cols, logits + r * cols);
}

bool ceSums(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
            const int32_t *targets, const float *m, float *s, float *t, std::string &error) {
  if (!detail::checkTargets(rows, classes, targets, error))
    return false;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kernels::kIgnoredTarget) {
      // s = 0 on every rank marks the row for ceLoss: a counted row's s is at least 1 (its
      // maximum's term) once summed over the ranks.
      s[r] = t[r] = 0.0f;
      continue;
    }
    const float *xr = logits + r * cols;
    const float max = m[r];
    s[r] = static_cast<float>(detail::sumTerms(cols, [&](int64_t j, auto tag) {
      return detail::fastExp(detail::load(xr + j, tag) - max);
    }));
    const int64_t local = static_cast<int64_t>(targets[r]) - first;
    t[r] = local >= 0 && local < cols ? xr[local] : 0.0f;
  }
  return true;
}

void ceLoss(int64_t rows, const float *m, const float *s, const float *t, double scale,
            float *loss) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (s[r] != 0.0f) // Not `> 0`: a NaN sum must reach the loss.
      total += static_cast<double>(m[r]) + std::log(static_cast<double>(s[r])) - t[r];
  *loss = static_cast<float>(total * scale);
}

bool ceGrad(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
            const int32_t *targets, const float *m, const float *s, const float *dloss,
            double scale, float *dlogits, std::string &error) {
  if (!detail::checkTargets(rows, classes, targets, error))
    return false;
  const float factor = static_cast<float>(static_cast<double>(*dloss) * scale);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = logits + r * cols;
    float *dr = dlogits + r * cols;
    if (targets[r] == kernels::kIgnoredTarget) {
      std::fill(dr, dr + cols, 0.0f);
      continue;
    }
    const float max = m[r];
    const float inv = static_cast<float>(1.0 / static_cast<double>(s[r]));
    detail::mapVec(cols, xr, dr, [max, inv](auto v) { return detail::fastExp(v - max) * inv; });
    // (p - 1) is exact near p = 1, where p * factor - factor would cancel.
    const int64_t local = static_cast<int64_t>(targets[r]) - first;
    if (local >= 0 && local < cols)
      dr[local] -= 1.0f;
    detail::mapVec(cols, dr, dr, [factor](auto v) { return v * factor; });
  }
  return true;
}

} // namespace tessel::cpu
