//===- KernelOperands.h - Checks of a kernel call's shapes and strides -*- C++ -*-===//
//
// What every device's handlers check of a call's size and stride parameters before they
// launch: the CPU and CUDA backends share the Shape and Strides of kernels/cpu/CpuKernels.h and
// refuse the same plans with the same messages.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_KERNELOPERANDS_H
#define TESSEL_RUNTIME_DEVICE_KERNELOPERANDS_H

#include "runtime/core/KernelCall.h"

#include "kernels/cpu/CpuKernels.h"

#include <cstdint>
#include <vector>

namespace tessel::rt {

/// The product of `v`'s entries (1 for none).
int64_t product(const std::vector<int64_t> &v);

/// The number of elements a strided view of `shape` reaches: one past its largest offset.
int64_t reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides);

/// `sizes` as a kernel Shape; false (with the call's error) beyond kMaxRank dims or for a size
/// that is not positive.
bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, cpu::Shape &shape);

/// `in` as one operand's Strides over `rank` dims; false for another count or a negative one.
bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, cpu::Strides &out);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_KERNELOPERANDS_H
