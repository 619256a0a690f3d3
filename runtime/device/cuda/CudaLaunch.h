//===- CudaLaunch.h - What a CUDA kernel call runs with ---------*- C++ -*-===//
//
// Private to device/cuda. A launch has the signature every device shares (KernelFn); what it
// needs of the CUDA device beyond its operands (the stream, scratch memory, where a bad id is
// recorded, cuBLASLt) the device hands it for the length of one launch, as the call's launch
// context (KernelCall::launch).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_CUDALAUNCH_H
#define TESSEL_RUNTIME_DEVICE_CUDA_CUDALAUNCH_H

#include "runtime/device/KernelArgs.h"

#include "kernels/cuda/CudaKernels.h"

#include <cuda_runtime_api.h>

#include <string>

namespace tessel::rt {

class CudaLaunch : public LaunchContext {
public:
  virtual cudaStream_t stream() const = 0;
  /// `bytes` of device memory that only this stream's kernels use, valid until the next call
  /// on the same stream; null (with the reason) if it cannot be had.
  virtual void *scratch(uint64_t bytes, std::string &error) = 0;
  /// `bytes` of device memory for the f32 copy of a call's 16-bit operand `slot`
  /// (cudaWidenedCall), apart from `scratch`, which the kernel itself may take; valid as
  /// `scratch` is.
  virtual void *operandScratch(size_t slot, uint64_t bytes, std::string &error) = 0;
  /// The device's record of the first out-of-range id, read at synchronize.
  virtual cuda::IdError *idError() const = 0;
  /// The cuBLASLt handle and this stream's workspace (created once, with the device).
  virtual const cuda::BlasContext &blas() const = 0;
  /// An event of this device for ordering a collective's work after the launch's stream.
  virtual cudaEvent_t collectiveEvent() const = 0;
  /// The kernel generated and loaded for fused_elementwise call `instr` when the plan was
  /// loaded (FusedKernels.h); null where the call runs on the interpreter kernel.
  virtual cudaKernel_t fusedKernel(const planfile::Instr *instr) const = 0;
};

/// The CUDA device's context of the launch in progress of `call`.
inline CudaLaunch &cudaLaunchOf(const KernelCall &call) {
  return static_cast<CudaLaunch &>(*call.launch);
}

/// The CUDA launch of kernel `id` on f32 and i32 operands; every kernel of the catalogue has
/// one.
KernelFn cudaKernel(catalogue::KernelId id);

/// The type a float operand (ConstFloats, Floats) is taken at: its buffer's own, f32 for an i32
/// buffer (kernels that read ids take them as ints, never through a float operand).
inline planfile::DType operandTypeOf(planfile::DType t) {
  return planfile::isFloat(t) ? t : planfile::DType::F32;
}

/// The CUDA launch of kernel `id` made for the 16-bit types of these operands, or null where
/// there is none (the catalogue's TESSEL_SIXTEEN_BIT column: Native kernels load and store
/// each operand at its own type; the rest run between widening copies, cudaWidenedCall). A
/// product takes them natively when a and b are of one 16-bit type and c is f32 or that type.
KernelFn cudaSixteenBitKernel(catalogue::KernelId id, const std::vector<planfile::DType> &ins,
                              const std::vector<planfile::DType> &outs);

/// What the CUDA kernels take beyond every device's check (CudaDevice::prepare): attention heads
/// of at most kMaxAttentionHead, fused bodies within the interpreter's steps and operands.
/// False with the reason in call.error.
bool cudaAccepts(KernelCall &call, const KernelArgs &args);

/// The launch of a call with 16-bit operands whose kernel has only its f32 CUDA launch: as the
/// CPU device's widenedCall (runtime/device/cpu/WidenedCall.h), on the launch's stream: 16-bit
/// operands widened into operand scratch, the f32 launch, 16-bit outputs narrowed back to
/// nearest even.
bool cudaWidenedCall(KernelCall &call, const KernelArgs &args);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CUDA_CUDALAUNCH_H
