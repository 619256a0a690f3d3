//===- AdamW.cu - The AdamW optimizer step over one tensor ----------------===//
//
// torch.optim.AdamW's single-tensor step in its order, as kernels/cpu/AdamW.cpp (the
// reference): the bias corrections are formed in double on the host, the learning rate and
// the gradient's scale read from device memory, where the step computed them. The same pass
// writes the parameter's 16-bit working copy where the plan asks for one.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

namespace tessel::cuda {

namespace {

struct AdamWConstants {
  double bc1, weightDecay;
  float bc2Sqrt, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps;
  bool smallWeight;
};

/// At most one of the three is non-null: the working copy in its type.
struct WorkingOut {
  float *f32 = nullptr;
  __nv_bfloat16 *bf16 = nullptr;
  __half *f16 = nullptr;
};

template <class T>
__global__ void adamwKernel(AdamWConstants k, const float *lrAt, const float *gradScaleAt,
                            int64_t n, float *param, const T *grad, float *m, float *v,
                            WorkingOut working) {
  const float lr = *lrAt, gradScale = *gradScaleAt;
  const float stepSize = static_cast<float>(lr / k.bc1);
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * k.weightDecay);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = detail::load(grad + i) * gradScale;
    const float p = param[i] * decay;
    // lerp(m, g, w) as ATen's: m + w (g - m) for |w| < 0.5, else g - (g - m)(1 - w).
    const float mi = k.smallWeight ? m[i] + k.oneMinusBeta1 * (g - m[i])
                                   : g - (g - m[i]) * (1.0f - k.oneMinusBeta1);
    const float vi = v[i] * k.beta2 + k.oneMinusBeta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) / k.bc2Sqrt + k.eps;
    const float updated = p - stepSize * mi / denom;
    param[i] = updated;
    if (working.bf16)
      working.bf16[i] = __float2bfloat16_rn(updated);
    else if (working.f16)
      working.f16[i] = __float2half_rn(updated);
    else if (working.f32)
      working.f32[i] = updated;
  }
}

} // namespace

cudaError_t adamw(const AdamWArgs &args, int64_t n, float *param, const float *grad, float *m,
                  float *v, cudaStream_t stream) {
  if (n < 0 || args.step < 1 || !args.lr || !args.gradScale)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const double step = static_cast<double>(args.step);
  AdamWConstants k;
  k.bc1 = 1.0 - std::pow(static_cast<double>(args.beta1), step);
  k.bc2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(args.beta2), step)));
  k.weightDecay = args.weightDecay;
  k.beta1 = args.beta1;
  k.beta2 = args.beta2;
  k.oneMinusBeta1 = static_cast<float>(1.0 - static_cast<double>(args.beta1));
  k.oneMinusBeta2 = static_cast<float>(1.0 - static_cast<double>(args.beta2));
  k.smallWeight = std::fabs(k.oneMinusBeta1) < 0.5f;
  k.eps = args.eps;
  WorkingOut working;
  if (args.working && args.workingType == Working::BF16)
    working.bf16 = static_cast<__nv_bfloat16 *>(args.working);
  else if (args.working && args.workingType == Working::F16)
    working.f16 = static_cast<__half *>(args.working);
  else
    working.f32 = static_cast<float *>(args.working);
  adamwKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(
      k, args.lr, args.gradScale, n, param, grad, m, v, working);
  return detail::launched();
}

} // namespace tessel::cuda
