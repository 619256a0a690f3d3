//===- AdamW.cu - The AdamW optimizer step over many tensors --------------===//
//
// torch.optim.AdamW's single-tensor step in its order, as kernels/cpu/AdamW.cpp (the
// reference): the bias corrections are formed in double on the host, the learning rate and
// the gradient's scale read from device memory, where the step computed them. Every tensor of a
// call is updated in as few launches as MultiTensor.cuh's tables take; the same pass writes
// each parameter's 16-bit working copy where the plan asks for one.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/MultiTensor.cuh"

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

/// The roles of a table's pointers.
enum Role { Param, Grad, M, V, WorkingCopy, Roles };
using Table = detail::MultiTensorTable<Roles>;

/// W is the working copy's element type.
template <class W>
__global__ void adamwKernel(AdamWConstants k, const float *lrAt, const float *gradScaleAt,
                            Table table) {
  int64_t begin, end;
  const int t = detail::blockRange(table, begin, end);
  float *param = static_cast<float *>(table.ptr[Param][t]);
  const float *grad = static_cast<const float *>(table.ptr[Grad][t]);
  float *m = static_cast<float *>(table.ptr[M][t]), *v = static_cast<float *>(table.ptr[V][t]);
  W *working = static_cast<W *>(table.ptr[WorkingCopy][t]);
  const float lr = *lrAt, gradScale = *gradScaleAt;
  const float stepSize = static_cast<float>(lr / k.bc1);
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * k.weightDecay);
  // kLoads elements a thread, all loaded before any is stored: the loads of one iteration
  // are in flight together (the stores could alias them, so the compiler would not reorder).
  constexpr int kLoads = 4;
  for (int64_t base = begin + threadIdx.x; base < end; base += int64_t(blockDim.x) * kLoads) {
    float gs[kLoads], ps[kLoads], ms[kLoads], vs[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t i = base + int64_t(u) * blockDim.x;
      if (i < end) {
        gs[u] = grad[i];
        ps[u] = param[i];
        ms[u] = m[i];
        vs[u] = v[i];
      }
    }
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t i = base + int64_t(u) * blockDim.x;
      if (i >= end)
        break;
      const float g = gs[u] * gradScale;
      const float p = ps[u] * decay;
      // lerp(m, g, w) as ATen's: m + w (g - m) for |w| < 0.5, else g - (g - m)(1 - w).
      const float mi = k.smallWeight ? ms[u] + k.oneMinusBeta1 * (g - ms[u])
                                     : g - (g - ms[u]) * (1.0f - k.oneMinusBeta1);
      const float vi = vs[u] * k.beta2 + k.oneMinusBeta2 * g * g;
      m[i] = mi;
      v[i] = vi;
      const float denom = sqrtf(vi) / k.bc2Sqrt + k.eps;
      const float updated = p - stepSize * mi / denom;
      param[i] = updated;
      if (working)
        detail::store(working + i, updated);
    }
  }
}

template <class W>
cudaError_t launchAdamW(const AdamWConstants &k, const AdamWArgs &args, const AdamWTensor *tensors,
                        size_t count, cudaStream_t stream) {
  return detail::forEachTable<Roles>(
      count, [&](size_t t) { return tensors[t].n; },
      [&](size_t t, void **ptrs) {
        const AdamWTensor &x = tensors[t];
        ptrs[Param] = x.param;
        ptrs[Grad] = const_cast<float *>(x.grad);
        ptrs[M] = x.m;
        ptrs[V] = x.v;
        ptrs[WorkingCopy] = x.working;
      },
      [&](const Table &table, int blocks) {
        adamwKernel<W>
            <<<blocks, detail::kMapThreads, 0, stream>>>(k, args.lr, args.gradScale, table);
        return detail::launched();
      });
}

} // namespace

cudaError_t adamw(const AdamWArgs &args, const AdamWTensor *tensors, size_t count,
                  cudaStream_t stream) {
  if (args.step < 1 || !args.lr || !args.gradScale || (count && !tensors))
    return cudaErrorInvalidValue;
  for (size_t t = 0; t < count; ++t)
    if (tensors[t].n < 0 ||
        (tensors[t].n && (!tensors[t].param || !tensors[t].grad || !tensors[t].m || !tensors[t].v)))
      return cudaErrorInvalidValue;
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
  switch (args.workingType) {
  case DType::BF16:
    return launchAdamW<__nv_bfloat16>(k, args, tensors, count, stream);
  case DType::F16:
    return launchAdamW<__half>(k, args, tensors, count, stream);
  case DType::F32:
    return launchAdamW<float>(k, args, tensors, count, stream);
  case DType::I32:
    break;
  }
  return cudaErrorInvalidValue;
}

} // namespace tessel::cuda
