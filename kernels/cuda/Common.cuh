//===- Common.cuh - What the CUDA kernels share -----------------*- CUDA -*-===//
//
// Private to kernels/cuda: element loads and stores (every kernel computes in f32 and is
// templated on its storage type, so a bf16 copy is one more instantiation), block-wide
// reductions, grid sizes, and the launch check every launcher ends with.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_COMMON_CUH
#define TESSEL_KERNELS_CUDA_COMMON_CUH

#include "kernels/cuda/CudaKernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace tessel::cuda::detail {

/// Threads per block of the row kernels (one block per row) and of the grid-stride maps.
constexpr int kRowThreads = 256;
constexpr int kMapThreads = 256;

/// An element of storage type T as the f32 the kernels compute in, and back.
template <class T> __device__ inline float load(const T *p) { return static_cast<float>(*p); }
template <class T> __device__ inline void store(T *p, float v) { *p = static_cast<T>(v); }

/// Blocks for a grid-stride loop over n elements: enough to fill the device, never zero.
inline unsigned mapBlocks(int64_t n) {
  const int64_t blocks = (n + kMapThreads - 1) / kMapThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65535 * 8)));
}

__device__ inline float warpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float warpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The sum over the block of every thread's `v`, returned to every thread. The order of the
/// additions depends only on the block size, so a result never changes between runs.
/// `scratch` holds 32 floats of shared memory; the call synchronises the block.
__device__ inline float blockSum(float v, float *scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warpSum(v);
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warpSum(v);
}

/// The largest `v` over the block, as blockSum.
__device__ inline float blockMax(float v, float *scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warpMax(v);
}

/// The block's row `xr` of `cols` elements: its maximum and the sum of exp(x - max), the two
/// halves of a softmax's (and a cross entropy's) normaliser; every thread gets both.
template <class T>
__device__ inline float2 rowMaxAndSumExp(int64_t cols, const T *xr, float *scratch) {
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    max = fmaxf(max, load(xr + j));
  max = blockMax(max, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    sum += expf(load(xr + j) - max);
  return make_float2(max, blockSum(sum, scratch));
}

/// Whether a [rows, cols] buffer can run as one block per row.
inline bool validRows(int64_t rows, int64_t cols) {
  return rows > 0 && cols > 0 && rows <= 0x7fffffff;
}

/// Records the first id outside [0, limit) that a kernel met (IdError in CudaKernels.h).
__device__ inline void reportBadId(IdError *error, int32_t id, int64_t position, int64_t limit) {
  if (atomicCAS(&error->flag, 0, 1) != 0)
    return;
  error->id = id;
  error->position = position;
  error->limit = limit;
}

/// The launch's own error (bad configuration), if any; kernel faults surface at the stream's
/// next synchronisation.
inline cudaError_t launched() { return cudaGetLastError(); }

} // namespace tessel::cuda::detail

#endif // TESSEL_KERNELS_CUDA_COMMON_CUH
