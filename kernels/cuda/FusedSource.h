//===- FusedSource.h - CUDA source of one fused elementwise body -*- C++ -*-===//
//
// The code a `fused_elementwise` call compiles to at plan load (runtime/device/cuda compiles
// it with NVRTC): one kernel specialised to the call's body and to how it reads each input,
// a grid-stride loop whose body is the steps as straight-line code. The steps call the
// functions of ElementwiseOps.cuh, whose text is embedded at build time and comes first in
// the source, so a generated step computes as the interpreter (FusedElementwise.cu) and the
// unfused kernels do. Plain C++: generating source needs neither a GPU nor NVRTC.
//
// The kernel is `extern "C" __global__ void tessel_fused(long long n, FusedKernelArgs args)`
// over the n elements of the output shape; the strides and operand addresses are its
// parameters, and the sizes too where every input is dense or a scalar, so calls that differ
// only in those share one compiled kernel.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_FUSEDSOURCE_H
#define TESSEL_KERNELS_CUDA_FUSEDSOURCE_H

#include "kernels/cuda/CudaKernels.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cuda {

/// The generated kernel's name (one kernel per source).
constexpr const char *kFusedKernelName = "tessel_fused";

/// How the generated code reads one input: at the element's own index (dense, row-major over
/// the shape), at its first element (every stride 0), or through the strides of the dims in
/// `dims` (a bit per dim whose stride is not 0; the others are skipped).
struct FusedInputAccess {
  enum class Kind { Dense, Scalar, Strided };
  Kind kind = Kind::Dense;
  uint32_t dims = 0;
  bool operator==(const FusedInputAccess &o) const { return kind == o.kind && dims == o.dims; }
};

/// What a generated kernel is specialised to: the shape, each input's access, and each
/// operand's element type (empty: all f32). Only a kernel with a strided input depends on the
/// sizes: it splits the element index into digits by constants (a multiply and a shift, not a
/// 64-bit division per element and dim). A 16-bit operand is loaded and widened, or rounded to
/// nearest even and stored, by the kernel itself: a mixed-precision call moves its operands'
/// own bytes, with no f32 copies on either side.
struct FusedLayout {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  std::vector<FusedInputAccess> inputs;
  std::vector<DType> inTypes, outTypes;
};

/// The layout of inputs read through `strides` over `shape`.
FusedLayout fusedLayout(const Shape &shape, const std::vector<Strides> &strides);

/// The generated kernel's second parameter, by value: the same struct is declared in the
/// generated source (fusedKernelSource writes it from these constants).
struct FusedKernelArgs {
  const void *in[kMaxFusedInputs] = {};
  void *out[kMaxFusedOutputs] = {};
  int64_t size[kMaxRank] = {};
  int64_t stride[kMaxFusedInputs][kMaxRank] = {};
};

/// The arguments of one call (the operands' addresses, of whatever element type the layout
/// gave the kernel); false for more inputs or outputs than FusedKernelArgs holds, or strides of
/// another count than the inputs.
bool fusedKernelArgs(const Shape &shape, const std::vector<Strides> &strides,
                     const std::vector<const float *> &inputs, const std::vector<float *> &outputs,
                     FusedKernelArgs &args);

/// The CUDA C++ source of the kernel that runs `steps` (value numbers as cpu::FusedStep's:
/// the inputs, then the steps) over inputs read as `layout` says and writes step outSteps[o]
/// to output o. Deterministic: the same body and layout give the same text. False, with the
/// reason, for a body the kernel could not run (a step reading a later value, an output step
/// out of range, more inputs or outputs than FusedKernelArgs holds).
bool fusedKernelSource(const std::vector<FusedStep> &steps, const FusedLayout &layout,
                       const std::vector<int32_t> &outSteps, std::string &source,
                       std::string &error);

/// Launches a loaded generated kernel (cudaLibraryGetKernel of kFusedKernelName) over the
/// elements of `shape` on `stream`, with the grid of the interpreter (FusedElementwise.cu).
cudaError_t launchFusedKernel(cudaKernel_t kernel, const Shape &shape, const FusedKernelArgs &args,
                              cudaStream_t stream);

/// What every generated source starts with: the kinds (from common/catalogue/KernelCatalogue.def, in the
/// order of cuda::UnaryKind and cuda::BinaryKind) and the text of ElementwiseOps.cuh.
const std::string &fusedSourcePrelude();

} // namespace tessel::cuda

#endif // TESSEL_KERNELS_CUDA_FUSEDSOURCE_H
