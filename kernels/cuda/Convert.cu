//===- Convert.cu - f32 to and from 16-bit storage ------------------------===//
//
// The CPU counterpart is kernels/cpu/Convert.cpp (common/Float16.h): narrowing rounds to
// nearest even and keeps NaN, infinities and subnormals, as CUDA's __float2bfloat16_rn and
// __float2half_rn do; widening is exact.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessel::cuda {

namespace {

__global__ void widenBf16Kernel(int64_t n, const __nv_bfloat16 *x, float *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}

__global__ void widenHalfKernel(int64_t n, const __half *x, float *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __half2float(x[i]);
}

__global__ void narrowBf16Kernel(int64_t n, const float *x, __nv_bfloat16 *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void narrowHalfKernel(int64_t n, const float *x, __half *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = __float2half_rn(x[i]);
}

} // namespace

cudaError_t widen(cpu::Half16 type, int64_t n, const uint16_t *x, float *y, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const unsigned blocks = detail::mapBlocks(n);
  if (type == cpu::Half16::BF16)
    widenBf16Kernel<<<blocks, detail::kMapThreads, 0, stream>>>(
        n, reinterpret_cast<const __nv_bfloat16 *>(x), y);
  else
    widenHalfKernel<<<blocks, detail::kMapThreads, 0, stream>>>(
        n, reinterpret_cast<const __half *>(x), y);
  return detail::launched();
}

cudaError_t narrow(cpu::Half16 type, int64_t n, const float *x, uint16_t *y, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const unsigned blocks = detail::mapBlocks(n);
  if (type == cpu::Half16::BF16)
    narrowBf16Kernel<<<blocks, detail::kMapThreads, 0, stream>>>(
        n, x, reinterpret_cast<__nv_bfloat16 *>(y));
  else
    narrowHalfKernel<<<blocks, detail::kMapThreads, 0, stream>>>(n, x,
                                                                 reinterpret_cast<__half *>(y));
  return detail::launched();
}

} // namespace tessel::cuda
