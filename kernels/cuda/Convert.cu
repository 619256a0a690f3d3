//===- Convert.cu - f32 to and from 16-bit storage ------------------------===//
//
// The CPU counterpart is kernels/cpu/Convert.cpp (common/support/Float16.h): narrowing rounds to
// nearest even and keeps NaN, infinities and subnormals, as CUDA's __float2bfloat16_rn and
// __float2half_rn do; widening is exact.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessel::cuda {

namespace {

// One element-wise conversion per storage type and direction.
struct WidenBf16 {
  __device__ float operator()(__nv_bfloat16 x) const { return __bfloat162float(x); }
};
struct WidenHalf {
  __device__ float operator()(__half x) const { return __half2float(x); }
};
struct NarrowBf16 {
  __device__ __nv_bfloat16 operator()(float x) const { return __float2bfloat16_rn(x); }
};
struct NarrowHalf {
  __device__ __half operator()(float x) const { return __float2half_rn(x); }
};

template <class From, class To, class Convert>
__global__ void convertKernel(int64_t n, const From *x, To *y, Convert convert) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = convert(x[i]);
}

template <class From, class To, class Convert>
cudaError_t convert(int64_t n, const void *x, void *y, Convert op, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  convertKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(
      n, static_cast<const From *>(x), static_cast<To *>(y), op);
  return detail::launched();
}

} // namespace

cudaError_t widen(DType type, int64_t n, const uint16_t *x, float *y, cudaStream_t stream) {
  return type == DType::BF16 ? convert<__nv_bfloat16, float>(n, x, y, WidenBf16{}, stream)
                             : convert<__half, float>(n, x, y, WidenHalf{}, stream);
}

cudaError_t narrow(DType type, int64_t n, const float *x, uint16_t *y, cudaStream_t stream) {
  return type == DType::BF16 ? convert<float, __nv_bfloat16>(n, x, y, NarrowBf16{}, stream)
                             : convert<float, __half>(n, x, y, NarrowHalf{}, stream);
}

} // namespace tessel::cuda
