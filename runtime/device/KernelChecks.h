//===- KernelChecks.h - What the kernel checks share ------------*- C++ -*-===//
//
// Private to runtime/device: the check of every kernel of the catalogue, declared once from
// common/catalogue/KernelCatalogue.def (KernelChecks.cpp dispatches to them; a kernel without one fails
// to link), and the pieces the checks of KernelChecks.cpp, ElementwiseChecks.cpp and
// AttentionChecks.cpp share. Each reports on the call (KernelCall::fail) and returns false.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_KERNELCHECKS_H
#define TESSEL_RUNTIME_DEVICE_KERNELCHECKS_H

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/KernelArgs.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt {

#define TESSEL_KERNEL(Id, Name, Family, Doc)                                                       \
  bool check(KernelCall &c, const catalogue::Id &p, args::Id &a);
#include "common/catalogue/KernelCatalogue.def"

namespace checks {

/// The product of `v`'s entries (1 for none).
int64_t product(const std::vector<int64_t> &v);

/// The number of elements a strided view of `shape` reaches: one past its largest offset.
int64_t reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides);

/// `sizes` as a kernel Shape; false beyond kMaxRank dims or for a size that is not positive.
bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, kernels::Shape &shape);

/// `in` as one operand's Strides over `rank` dims; false for another count or a negative one.
bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, kernels::Strides &out);

/// A shape and an operand's strides over it, which must reach no further than input `k`.
bool stridedInput(KernelCall &c, size_t k, const std::vector<int64_t> &sizes,
                  const std::vector<int64_t> &strides, kernels::Strides &out);

/// Where this rank's block of a dim split over group `name` lies: [first, first + size) of
/// `whole`. Without a group (null) the rank holds the whole dim.
bool blockOfDim(KernelCall &c, const std::string *name, int64_t size, int64_t &first,
                int64_t &whole);

/// pow's exponent, which it requires; 0 for the functions that have none.
bool exponentOf(KernelCall &c, catalogue::UnaryOp op, const std::optional<double> &exponent,
                float &out);

/// The `rows` and `cols` of a row-wise kernel, which must be positive.
template <class P> bool rowsCols(KernelCall &c, const P &p, args::Rows &a) {
  a.rows = p.rows;
  a.cols = p.cols;
  if (a.rows <= 0 || a.cols <= 0)
    return c.fail("has non-positive rows or cols");
  return true;
}

/// The optional `scale` of a loss: absent, the loss is the mean over rows.
template <class P> bool lossScale(KernelCall &c, const P &p, args::CrossEntropy &a) {
  a.scaled = p.scale.has_value();
  a.scale = p.scale.value_or(0.0);
  if (a.scaled && !std::isfinite(a.scale))
    return c.fail("has a non-finite scale");
  return true;
}

} // namespace checks

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_KERNELCHECKS_H
