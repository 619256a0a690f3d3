//===- Convert.cpp - f32 to and from 16-bit storage -----------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/ElementwiseRuns.h"
#include "kernels/cpu/Loops.h"

#include "common/support/Float16.h"

namespace tessel::cpu {

namespace {

/// y[i] = convert(x[i]) for i < n, over the threads when n is large enough. One loop for every
/// direction and 16-bit type: the conversion is inlined into it.
template <class From, class To, class Convert>
void convertEach(int64_t n, const From *x, To *y, Convert convert) {
#pragma omp parallel for schedule(static) if (n >= detail::kParallelGrain)
  for (int64_t i = 0; i < n; ++i)
    y[i] = convert(x[i]);
}

} // namespace

void widen(DType type, int64_t n, const uint16_t *x, float *y) {
  if (type == DType::BF16)
    convertEach(n, x, y, [](uint16_t h) { return bf16ToFloat(h); });
  else
    convertEach(n, x, y, [](uint16_t h) { return halfToFloat(h); });
}

void detail::roundRun(DType type, int64_t n, float *x) {
  if (type == DType::BF16)
    for (int64_t i = 0; i < n; ++i)
      x[i] = bf16ToFloat(floatToBf16(x[i]));
  else
    for (int64_t i = 0; i < n; ++i)
      x[i] = halfToFloat(floatToHalf(x[i]));
}

void narrow(DType type, int64_t n, const float *x, uint16_t *y) {
  if (type == DType::BF16)
    convertEach(n, x, y, [](float f) { return floatToBf16(f); });
  else
    convertEach(n, x, y, [](float f) { return floatToHalf(f); });
}

} // namespace tessel::cpu
