//===- Loss.cpp - Cross entropy over the last dim -------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Ids.h"
#include "kernels/cpu/Loops.h"
#include "kernels/cpu/Simd.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::cpu {

using detail::kParallelGrain;

namespace {

/// The row's max and sum of exp(x - max), the latter in double.
struct RowLogSumExp {
  float max;
  double sum;
};

RowLogSumExp logSumExp(int64_t cols, const float *x) {
  const float max = detail::maxOf(cols, x);
  const double sum = detail::sumTerms(
      cols, [&](int64_t j, auto t) { return detail::fastExp(detail::load(x + j, t) - max); });
  return {max, sum};
}

/// The sum over rows of -log softmax(logits[row])[targets[row]], in double, rows in order;
/// an ignored target's row adds 0.
bool sumOfRowLosses(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                    double &total, std::string &error) {
  if (!detail::checkTargets(rows, cols, targets, error))
    return false;
  std::vector<double> perRow(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kernels::kIgnoredTarget) {
      perRow[r] = 0.0;
      continue;
    }
    const float *xr = logits + r * cols;
    const RowLogSumExp s = logSumExp(cols, xr);
    perRow[r] = static_cast<double>(s.max) + std::log(s.sum) - xr[targets[r]];
  }
  total = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    total += perRow[r];
  return true;
}

/// dlogits = (softmax(logits) - onehot(targets)) * factor; zero in an ignored target's row.
bool rowLossGrad(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                 float factor, float *dlogits, std::string &error) {
  if (!detail::checkTargets(rows, cols, targets, error))
    return false;
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = logits + r * cols;
    float *dr = dlogits + r * cols;
    if (targets[r] == kernels::kIgnoredTarget) {
      std::fill(dr, dr + cols, 0.0f);
      continue;
    }
    const float max = detail::maxOf(cols, xr);
    detail::mapVec(cols, xr, dr, [max](auto v) { return detail::fastExp(v - max); });
    const float inv = static_cast<float>(
        1.0 / detail::sumTerms(cols, [&](int64_t j, auto t) { return detail::load(dr + j, t); }));
    detail::mapVec(cols, dr, dr, [inv](auto v) { return v * inv; });
    // (p - 1) is exact near p = 1, where p * factor - factor would cancel.
    dr[targets[r]] -= 1.0f;
    detail::mapVec(cols, dr, dr, [factor](auto v) { return v * factor; });
  }
  return true;
}

} // namespace

bool crossEntropy(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                  float *loss, std::string &error) {
  double total = 0.0;
  if (!sumOfRowLosses(rows, cols, logits, targets, total, error))
    return false;
  *loss = rows > 0 ? static_cast<float>(total / static_cast<double>(rows)) : 0.0f;
  return true;
}

bool crossEntropy(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                  double scale, float *loss, std::string &error) {
  double total = 0.0;
  if (!sumOfRowLosses(rows, cols, logits, targets, total, error))
    return false;
  *loss = static_cast<float>(total * scale);
  return true;
}

bool crossEntropyGrad(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                      const float *dloss, float *dlogits, std::string &error) {
  const float factor = rows > 0 ? *dloss / static_cast<float>(rows) : 0.0f;
  return rowLossGrad(rows, cols, logits, targets, factor, dlogits, error);
}

bool crossEntropyGrad(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                      const float *dloss, double scale, float *dlogits, std::string &error) {
  const float factor = static_cast<float>(static_cast<double>(*dloss) * scale);
  return rowLossGrad(rows, cols, logits, targets, factor, dlogits, error);
}

} // namespace tessel::cpu
