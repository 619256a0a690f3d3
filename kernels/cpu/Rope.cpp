//===- Rope.cpp - Rotary position embedding -------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"
#include "kernels/RopeFrequency.h"

#include <cmath>
#include <vector>

namespace tessel::cpu {

using detail::kParallelGrain;

void rope(int64_t batch, int64_t seq, int64_t heads, int64_t head, float theta, bool inverse,
          const float *x, float *y, int64_t headStart, int64_t tailStart,
          const kernels::RopeScaling &scaling) {
  const int64_t half = head / 2;
  // cos and sin of pos * theta^(-2i/head) (scaled), computed in double and rounded once, for
  // the position each row here has in the whole sequence.
  std::vector<double> frequency(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    frequency[i] = kernels::ropeFrequency(i, head, theta, scaling);
  std::vector<float> cosines(static_cast<size_t>(seq * half)), sines(cosines.size());
  for (int64_t p = 0; p < seq; ++p) {
    const int64_t pos = headStart < 0 ? p : p < seq / 2 ? headStart + p : tailStart + p - seq / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos) * frequency[i];
      cosines[p * half + i] = static_cast<float>(std::cos(angle));
      sines[p * half + i] = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  const int64_t rows = batch * seq;
#pragma omp parallel for schedule(static) if (rows * heads * head >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = r % seq;
    const float *c = cosines.data() + pos * half;
    const float *s = sines.data() + pos * half;
    for (int64_t h = 0; h < heads; ++h) {
      const float *xh = x + (r * heads + h) * head;
      float *yh = y + (r * heads + h) * head;
      for (int64_t i = 0; i < half; ++i) {
        const float lo = xh[i], hi = xh[i + half];
        yh[i] = lo * c[i] - hi * s[i];
        yh[i + half] = hi * c[i] + lo * s[i];
      }
    }
  }
}

} // namespace tessel::cpu
