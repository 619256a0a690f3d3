//===- Strides.cpp - Dense strides of a shape -----------------------------===//

#include "kernels/cpu/CpuKernels.h"

namespace tessel::cpu {

Strides denseStrides(const Shape &shape) {
  Strides s;
  int64_t step = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    s.stride[i] = step;
    step *= shape.size[i];
  }
  return s;
}

} // namespace tessel::cpu
