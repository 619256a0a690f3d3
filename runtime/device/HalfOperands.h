//===- HalfOperands.h - 16-bit operands around f32 kernels -----*- C++ -*-===//
//
// What every device's widening wrapper decides the same way (device/cpu/WidenedCall.cpp,
// device/cuda/CudaWidenedCall.cpp): which operands are 16-bit, which outputs must be widened
// before the call, and which outputs are one of the inputs (so that an in-place kernel stays in
// place once widened). The devices differ only in where the f32 copies live and what converts.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_HALFOPERANDS_H
#define TESSEL_RUNTIME_DEVICE_HALFOPERANDS_H

#include "runtime/device/KernelCall.h"

#include "kernels/KernelTypes.h"

#include <cstddef>
#include <vector>

namespace tessel::rt {

/// How a device runs a call of kernel `id` with 16-bit operands (KernelCatalogue.def's
/// TESSEL_SIXTEEN_BIT column).
enum class SixteenBit { CudaNative, Widened, Moved, Refused };
SixteenBit sixteenBitOf(catalogue::KernelId id);

/// How device `device` ("cpu", "cuda") runs a call of `kernel` with operands of these types:
/// Moved where it takes the call as it is (no 16-bit operand, or a collective's or wait's),
/// Refused with the reason in `error` (a 16-bit operand of a control kernel, which reads f32),
/// else the kernel's column (CudaNative or Widened), for the device to choose its 16-bit launch.
SixteenBit sixteenBitCall(const catalogue::KernelInfo &kernel,
                          const std::vector<planfile::DType> &ins,
                          const std::vector<planfile::DType> &outs, const char *device,
                          std::string &error);

/// Whether the call reads its outputs, so that they must be widened before it as well: it adds
/// into them (the catalogue's `accumulate` parameter) or updates them in place (the caches of
/// paged_attention, which keeps every position the call does not write). No other kernel reads
/// a 16-bit output: those that carry values in through an output (embedding_grad, the ring
/// attention steps, the optimizers' state) take f32 outputs only (KernelCatalogue.def), and an
/// output that is one of the inputs shares its widened copy.
bool readsOutputs(const planfile::Instr &instr);

/// The input that output `k` of `instr` is (the same address, type and elements in the call's
/// operands `in` and `out`, taken before widening); in.size() when it is none of them.
size_t inputSameAsOutput(const planfile::Instr &instr, const KernelCall &c,
                         const std::vector<void *> &in, const std::vector<void *> &out, size_t k);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_HALFOPERANDS_H
