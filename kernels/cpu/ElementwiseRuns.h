//===- ElementwiseRuns.h - One thread's run of an elementwise kernel -*- C++ -*-===//
//
// Private to kernels/cpu: the elementwise kernels' arithmetic over one dense run of elements,
// on the calling thread. `unary`, `unaryGrad` split their work into such runs; the fused
// elementwise kernel calls them on its tiles, so a fused step computes the same bits as the
// kernel it replaces.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_ELEMENTWISERUNS_H
#define TESSEL_KERNELS_CPU_ELEMENTWISERUNS_H

#include "kernels/cpu/CpuKernels.h"

namespace tessel::cpu::detail {

void unaryRun(UnaryKind kind, int64_t n, const float *x, float *y, float exponent);
void unaryGradRun(UnaryKind kind, int64_t n, const float *x, const float *y, const float *dy,
                  float *dx, float exponent);
/// out[i] = a[i] op b[i] (dense operands).
void binaryRun(BinaryKind kind, int64_t n, const float *a, const float *b, float *out);
/// out[i] = c[i] != 0 ? a[i] : b[i] (dense operands).
void selectRun(int64_t n, const float *c, const float *a, const float *b, float *out);
/// x[i] rounded to `type` (to nearest even, as `narrow` stores it) and widened back, in place.
void roundRun(DType type, int64_t n, float *x);

} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_ELEMENTWISERUNS_H
