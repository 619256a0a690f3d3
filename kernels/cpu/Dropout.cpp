//===- Dropout.cpp - Counter-based dropout --------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include <cstring>

namespace tessel::cpu {

using detail::kParallelGrain;

namespace {

/// The i-th output of a splitmix64 generator seeded with `seed`: a pure function of (seed, i),
/// so the mask is the same whatever thread computes element i, forward and backward.
uint64_t splitmix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace

void dropout(int64_t n, float rate, uint64_t seed, const float *x, float *y) {
  if (rate <= 0.0f) {
    if (y != x)
      std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  // As PyTorch: the kept elements are multiplied by 1 / (1 - rate), the dropped by 0.
  const float keepScale = rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    // The top 24 bits as a float in [0, 1), exactly.
    const float u =
        static_cast<float>(splitmix64(seed, static_cast<uint64_t>(i)) >> 40) * (1.0f / 16777216.0f);
    y[i] = x[i] * (u >= rate ? keepScale : 0.0f);
  }
}

void dropoutBlock(const std::vector<int64_t> &shape, const std::vector<int64_t> &offset,
                  const std::vector<int64_t> &tail, const std::vector<int64_t> &wholeShape,
                  float rate, uint64_t seed, const float *x, float *y) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  const float keepScale = rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
  const int rank = static_cast<int>(shape.size());
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    // The element's index in the whole tensor names its mask bit, so every layout of the
    // tensor over ranks drops the same elements.
    int64_t rest = i, whole = 0, stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = rest % shape[d], half = shape[d] / 2;
      whole += (tail[d] >= 0 && i >= half ? tail[d] + i - half : offset[d] + i) * stride;
      rest /= shape[d];
      stride *= wholeShape[d];
    }
    const float u = static_cast<float>(splitmix64(seed, static_cast<uint64_t>(whole)) >> 40) *
                    (1.0f / 16777216.0f);
    y[i] = rate <= 0.0f ? x[i] : x[i] * (u >= rate ? keepScale : 0.0f);
  }
}

} // namespace tessel::cpu
