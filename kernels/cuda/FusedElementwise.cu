//===- FusedElementwise.cu - A fused elementwise body, interpreted ---------===//
//
// The CPU counterpart is cpu::fusedElementwise (kernels/cpu/FusedElementwise.cpp). The whole
// body travels as one kernel parameter; each thread takes elements in a grid-stride loop, reads
// the inputs through their strides and runs the steps in order with the device functions of the
// unfused kernels (ElementwiseOps.cuh), so a fused step computes as its own kernel does. The
// steps are interpreted (a switch per step and element, the values in local memory): one pass
// over memory instead of one per step. The CUDA device runs a body this way where it has no
// kernel generated for it at plan load (FusedSource.h, compiled with NVRTC); launchFusedKernel
// launches such a kernel over the same grid.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/ElementwiseOps.cuh"
#include "kernels/cuda/FusedSource.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessel::cuda {

namespace {

struct DeviceStep {
  int8_t kind = 0, unary = 0, binary = 0;
  int8_t round = 0; ///< 0: none; 1: to bf16; 2: to f16 (FusedStep::rounded, narrow).
  int16_t args[3] = {0, 0, 0};
  float value = 0;
};

/// The body, the shape and the operands, by value into the kernel.
struct FusedProgram {
  int steps = 0, inputs = 0, outputs = 0, rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t inStride[kMaxFusedInputs][kMaxRank] = {};
  const float *in[kMaxFusedInputs] = {};
  float *out[kMaxFusedOutputs] = {};
  int32_t outStep[kMaxFusedOutputs] = {};
  DeviceStep step[kMaxFusedSteps] = {};
};

__global__ void fusedKernel(int64_t n, FusedProgram p) {
  // Value numbers as the CPU's: the inputs, then the steps in order.
  float values[kMaxFusedInputs + kMaxFusedSteps];
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    for (int k = 0; k < p.inputs; ++k) {
      int64_t rest = e, offset = 0;
      for (int d = p.rank - 1; d >= 0; --d) {
        offset += (rest % p.size[d]) * p.inStride[k][d];
        rest /= p.size[d];
      }
      values[k] = p.in[k][offset];
    }
    for (int s = 0; s < p.steps; ++s) {
      const DeviceStep &st = p.step[s];
      float v = 0.0f;
      switch (static_cast<FusedStep::Kind>(st.kind)) {
      case FusedStep::Kind::Const:
        v = st.value;
        break;
      case FusedStep::Kind::Unary:
        v = detail::applyUnary(static_cast<UnaryKind>(st.unary), values[st.args[0]], st.value);
        break;
      case FusedStep::Kind::UnaryGrad:
        v = detail::applyUnaryGrad(static_cast<UnaryKind>(st.unary), values[st.args[0]],
                                   values[st.args[1]], values[st.args[2]], st.value);
        break;
      case FusedStep::Kind::Binary:
        v = detail::applyBinary(static_cast<BinaryKind>(st.binary), values[st.args[0]],
                                values[st.args[1]]);
        break;
      case FusedStep::Kind::Where:
        v = values[st.args[0]] != 0.0f ? values[st.args[1]] : values[st.args[2]];
        break;
      }
      if (st.round == 1)
        v = __bfloat162float(__float2bfloat16_rn(v));
      else if (st.round == 2)
        v = __half2float(__float2half_rn(v));
      values[p.inputs + s] = v;
    }
    for (int o = 0; o < p.outputs; ++o)
      p.out[o][e] = values[p.inputs + p.outStep[o]];
  }
}

} // namespace

cudaError_t fusedElementwise(const Shape &shape, const std::vector<FusedStep> &steps,
                             const std::vector<const float *> &inputs,
                             const std::vector<Strides> &inStrides,
                             const std::vector<float *> &outputs,
                             const std::vector<int32_t> &outSteps, cudaStream_t stream) {
  if (shape.rank < 0 || shape.rank > kMaxRank || steps.empty() ||
      steps.size() > static_cast<size_t>(kMaxFusedSteps) ||
      inputs.size() > static_cast<size_t>(kMaxFusedInputs) || inStrides.size() != inputs.size() ||
      outputs.empty() || outputs.size() > static_cast<size_t>(kMaxFusedOutputs) ||
      outSteps.size() != outputs.size())
    return cudaErrorInvalidValue;
  FusedProgram p;
  p.steps = static_cast<int>(steps.size());
  p.inputs = static_cast<int>(inputs.size());
  p.outputs = static_cast<int>(outputs.size());
  p.rank = shape.rank;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.size[d] <= 0)
      return cudaErrorInvalidValue;
    p.size[d] = shape.size[d];
  }
  for (int k = 0; k < p.inputs; ++k) {
    p.in[k] = inputs[k];
    for (int d = 0; d < shape.rank; ++d)
      p.inStride[k][d] = inStrides[k].stride[d];
  }
  for (int s = 0; s < p.steps; ++s) {
    const FusedStep &from = steps[s];
    DeviceStep &to = p.step[s];
    to.kind = static_cast<int8_t>(from.kind);
    to.unary = static_cast<int8_t>(from.unary);
    to.binary = static_cast<int8_t>(from.binary);
    to.value = from.value;
    to.round = !from.rounded ? 0 : from.narrow == DType::BF16 ? 1 : 2;
    // The operands a step reads must be inputs or earlier steps; the others are unused.
    for (int k = 0; k < 3; ++k) {
      if (k >= FusedStep::operandsOf(from.kind)) {
        to.args[k] = 0;
        continue;
      }
      if (from.args[k] < 0 || from.args[k] >= p.inputs + s)
        return cudaErrorInvalidValue;
      to.args[k] = static_cast<int16_t>(from.args[k]);
    }
  }
  for (int o = 0; o < p.outputs; ++o) {
    if (outSteps[o] < 0 || outSteps[o] >= p.steps)
      return cudaErrorInvalidValue;
    p.out[o] = outputs[o];
    p.outStep[o] = outSteps[o];
  }
  const int64_t n = shape.numElements();
  fusedKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(n, p);
  return detail::launched();
}

cudaError_t launchFusedKernel(cudaKernel_t kernel, const Shape &shape, const FusedKernelArgs &args,
                              cudaStream_t stream) {
  if (!kernel || shape.rank < 0 || shape.rank > kMaxRank)
    return cudaErrorInvalidValue;
  long long n = shape.numElements();
  FusedKernelArgs copy = args;
  void *params[] = {&n, &copy};
  return cudaLaunchKernel(kernel, dim3(detail::mapBlocks(n)), dim3(detail::kMapThreads), params, 0,
                          stream);
}

} // namespace tessel::cuda
