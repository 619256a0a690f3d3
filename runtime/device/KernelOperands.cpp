//===- KernelOperands.cpp - Checks of a kernel call's shapes and strides --===//

#include "runtime/device/KernelOperands.h"

#include <string>

namespace tessel::rt {

int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

int64_t reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    last += (shape[i] - 1) * strides[i];
  return last + 1;
}

bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, cpu::Shape &shape) {
  if (sizes.size() > static_cast<size_t>(cpu::kMaxRank))
    return c.fail("has rank " + std::to_string(sizes.size()) + "; at most " +
                  std::to_string(cpu::kMaxRank) + " is supported");
  shape.rank = static_cast<int>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0)
      return c.fail("has a non-positive size");
    shape.size[i] = sizes[i];
  }
  return true;
}

bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, cpu::Strides &out) {
  if (in.size() != rank)
    return c.fail("has " + std::to_string(in.size()) + " strides for " + std::to_string(rank) +
                  " dims");
  for (size_t i = 0; i < rank; ++i) {
    if (in[i] < 0)
      return c.fail("has a negative stride");
    out.stride[i] = in[i];
  }
  return true;
}

} // namespace tessel::rt
