//===- Combine.cu - The reduction of the collectives between GPU ranks ----===//
//
// y[i] = y[i] (op) x[i]: how a LocalCommunicator whose ranks share a GPU combines one member's
// buffer (f32, or bf16 or f16 widened exactly) into an f32 sum or maximum, the members in group-index order, exactly as the host's
// reduceInto (runtime/comm/Communicator.h) does: one f32 addition per element (no fused
// multiply-add, no reassociation), and a maximum that keeps a NaN. So ranks as threads on a GPU
// give the bits of ranks as threads on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessel::cuda {

namespace {

using namespace detail;

__device__ float widened(float x) { return x; }
__device__ float widened(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ float widened(__half x) { return __half2float(x); }

template <class X> __global__ void combineKernel(bool max, int64_t n, float *y, const X *x) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float a = y[i], b = widened(x[i]);
    // As reduceInto: y = (y is NaN or x > y) ? x : y, so a NaN in either stays.
    y[i] = max ? (a != a || b > a ? b : a) : __fadd_rn(a, b);
  }
}

template <class X> cudaError_t launchCombine(bool max, int64_t n, float *y, const X *x,
                                             cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  combineKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(max, n, y, x);
  return detail::launched();
}

} // namespace

cudaError_t combine(bool max, int64_t n, float *y, const float *x, cudaStream_t stream) {
  return launchCombine(max, n, y, x, stream);
}

cudaError_t combine(bool max, DType type, int64_t n, float *y, const uint16_t *x,
                    cudaStream_t stream) {
  if (type == DType::BF16)
    return launchCombine(max, n, y, reinterpret_cast<const __nv_bfloat16 *>(x), stream);
  return launchCombine(max, n, y, reinterpret_cast<const __half *>(x), stream);
}

} // namespace tessel::cuda
