//===- Convert.cpp - f32 to and from 16-bit storage -----------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include "common/Float16.h"

namespace tessel::cpu {

void widen(Half16 type, int64_t n, const uint16_t *x, float *y) {
  if (type == Half16::BF16) {
#pragma omp parallel for schedule(static) if (n >= detail::kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      y[i] = bf16ToFloat(x[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= detail::kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    y[i] = halfToFloat(x[i]);
}

void narrow(Half16 type, int64_t n, const float *x, uint16_t *y) {
  if (type == Half16::BF16) {
#pragma omp parallel for schedule(static) if (n >= detail::kParallelGrain)
    for (int64_t i = 0; i < n; ++i)
      y[i] = floatToBf16(x[i]);
    return;
  }
#pragma omp parallel for schedule(static) if (n >= detail::kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    y[i] = floatToHalf(x[i]);
}

} // namespace tessel::cpu
