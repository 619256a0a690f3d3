//===- Rope.cpp - Rotary position embedding -------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"
#include "kernels/RopeFrequency.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessel::cpu {

using detail::kParallelGrain;

namespace {

/// Turns the heads of one row by the angles whose cosines and sines are c and s.
void turnRow(int64_t heads, int64_t head, const float *c, const float *s, const float *x,
             float *y) {
  const int64_t half = head / 2;
  for (int64_t h = 0; h < heads; ++h) {
    const float *xh = x + h * head;
    float *yh = y + h * head;
    for (int64_t i = 0; i < half; ++i) {
      const float lo = xh[i], hi = xh[i + half];
      yh[i] = lo * c[i] - hi * s[i];
      yh[i + half] = hi * c[i] + lo * s[i];
    }
  }
}

/// The cosines and sines of position `pos`, as the table of positions 0 .. seq - 1 holds them.
void anglesOf(int64_t pos, int64_t half, const double *frequency, bool inverse, float *c,
              float *s) {
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * frequency[i];
    c[i] = static_cast<float>(std::cos(angle));
    s[i] = static_cast<float>(inverse ? -std::sin(angle) : std::sin(angle));
  }
}

} // namespace

void rope(int64_t batch, int64_t seq, int64_t heads, int64_t head, float theta, bool inverse,
          const float *x, float *y, int64_t headStart, int64_t tailStart,
          const kernels::RopeScaling &scaling, const int32_t *positions) {
  const int64_t half = head / 2;
  // cos and sin of pos * theta^(-2i/head) (scaled), computed in double and rounded once, for
  // the position each row here has in the whole sequence.
  std::vector<double> frequency(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    frequency[i] = kernels::ropeFrequency(i, head, theta, scaling);
  const int64_t rows = batch * seq;
  if (positions) {
    // Each row at its own position: its angles computed where it is turned.
#pragma omp parallel if (rows * heads * head >= kParallelGrain && rows > 1)
    {
      std::vector<float> c(static_cast<size_t>(half)), s(c.size());
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        anglesOf(std::max<int64_t>(positions[r], 0), half, frequency.data(), inverse, c.data(),
                 s.data());
        turnRow(heads, head, c.data(), s.data(), x + r * heads * head, y + r * heads * head);
      }
    }
    return;
  }
  std::vector<float> cosines(static_cast<size_t>(seq * half)), sines(cosines.size());
  for (int64_t p = 0; p < seq; ++p) {
    const int64_t pos = headStart < 0 ? p : p < seq / 2 ? headStart + p : tailStart + p - seq / 2;
    anglesOf(pos, half, frequency.data(), inverse, cosines.data() + p * half,
             sines.data() + p * half);
  }
#pragma omp parallel for schedule(static) if (rows * heads * head >= kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = r % seq;
    turnRow(heads, head, cosines.data() + p * half, sines.data() + p * half, x + r * heads * head,
            y + r * heads * head);
  }
}

} // namespace tessel::cpu
