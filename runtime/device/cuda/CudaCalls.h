//===- CudaCalls.h - What the CUDA device's launches share ------*- C++ -*-===//
//
// Private to runtime/device/cuda. The CUDA device's launches are defined by kernel family
// (CudaElementwiseCalls.cpp, CudaProductCalls.cpp, CudaOptimizerCalls.cpp) and tabled by the
// catalogue in CudaKernelCalls.cpp; this header declares one launch per catalogue kernel (a
// kernel whose launch is not defined fails to link) and the helpers every family uses.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_CUDACALLS_H
#define TESSEL_RUNTIME_DEVICE_CUDA_CUDACALLS_H

#include "runtime/device/KernelArgs.h"
#include "runtime/device/KernelCall.h"

#include "kernels/cuda/CudaKernels.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessel::rt::cudacalls {

/// The end of a launch: the CUDA error as the call's.
bool launched(KernelCall &c, cudaError_t e);
/// The stream of the launch in progress, and its device-side record of a bad id.
cudaStream_t stream(const KernelCall &c);
cuda::IdError *idError(const KernelCall &c);
/// Input k at the plan's element type (f32 for a call made without a plan instruction).
cuda::ConstFloats typedIn(KernelCall &c, size_t k);
/// Output k at the plan's element type.
cuda::Floats typedOut(KernelCall &c, size_t k);
/// `bytes` of the launch's scratch memory; null with the call's error.
void *scratchBytes(KernelCall &c, uint64_t bytes);
/// `floats` f32 elements of the launch's scratch memory; null with the call's error.
float *scratchFloats(KernelCall &c, int64_t floats);

/// Runs a fused call on the kernel generated for it at plan load (CudaElementwiseCalls.cpp;
/// the 16-bit table runs fused calls with it too).
bool launchGenerated(KernelCall &c, const args::FusedElementwise &a, cudaKernel_t generated);
/// gemm with 16-bit a and b on cuBLASLt's 16-bit product (CudaProductCalls.cpp), the 16-bit
/// table's gemm.
bool launchMixedGemm(KernelCall &c, const KernelArgs &args);

/// Every kernel's launch, by its arguments. The collectives' arguments are each a
/// Collective, launched as one; a family the catalogue gains fails to compile here until its
/// launches are declared.
#define TESSEL_CUDA_LAUNCH_Compute(Id) bool launch(KernelCall &c, const args::Id &a);
#define TESSEL_CUDA_LAUNCH_Control(Id) bool launch(KernelCall &c, const args::Id &a);
#define TESSEL_CUDA_LAUNCH_Collective(Id)
#define TESSEL_KERNEL(Id, Name, Family, Doc) TESSEL_CUDA_LAUNCH_##Family(Id)
#include "common/catalogue/KernelCatalogue.def"
#undef TESSEL_CUDA_LAUNCH_Compute
#undef TESSEL_CUDA_LAUNCH_Control
#undef TESSEL_CUDA_LAUNCH_Collective
bool launch(KernelCall &c, const args::Collective &a);

} // namespace tessel::rt::cudacalls

#endif // TESSEL_RUNTIME_DEVICE_CUDA_CUDACALLS_H
