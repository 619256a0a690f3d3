//===- KernelShapes.h - Shapes and strides for kernel tests -----*- C++ -*-===//
#ifndef TESSEL_TEST_UNIT_KERNELSHAPES_H
#define TESSEL_TEST_UNIT_KERNELSHAPES_H

#include "kernels/cpu/CpuKernels.h"

#include <cstdint>
#include <initializer_list>

namespace tessel::test {

/// A kernel shape from its sizes, outermost first.
inline cpu::Shape shapeOf(std::initializer_list<int64_t> sizes) {
  cpu::Shape s;
  for (int64_t n : sizes)
    s.size[s.rank++] = n;
  return s;
}

/// Element strides, one per dim of the shape they go with (0 broadcasts).
inline cpu::Strides stridesOf(std::initializer_list<int64_t> strides) {
  cpu::Strides s;
  int d = 0;
  for (int64_t v : strides)
    s.stride[d++] = v;
  return s;
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_KERNELSHAPES_H
