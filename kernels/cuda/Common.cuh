//===- Common.cuh - What the CUDA kernels share -----------------*- CUDA -*-===//
//
// Private to kernels/cuda: element loads and stores (every kernel computes in f32 and is
// templated on its operands: plain f32 pointers, or operands of a type given per call), block-wide
// reductions, grid sizes, and the launch check every launcher ends with.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_COMMON_CUH
#define TESSEL_KERNELS_CUDA_COMMON_CUH

#include "kernels/cuda/CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace tessel::cuda::detail {

/// Threads per block of the row kernels (one block per row) and of the grid-stride maps.
constexpr int kRowThreads = 256;
constexpr int kMapThreads = 256;

/// Where an attention kernel writes each query row's log-sum-exp: element
/// b·batch + h·head + i·row for query i of head h of sequence b. The gradient kernels read
/// them head-major ([batch, heads, seq], each head's rows together); the plan's `lse` operand
/// is row-major ([batch, seq, heads], as the queries).
struct LseLayout {
  int64_t batch = 0, head = 0, row = 0;

  __host__ __device__ int64_t at(int64_t b, int64_t h, int64_t i) const {
    return b * batch + h * head + i * row;
  }
  static LseLayout headMajor(const AttentionArgs &a) { return {a.heads * a.seq, a.seq, 1}; }
  static LseLayout rowMajor(const AttentionArgs &a) { return {a.seq * a.heads, 1, a.heads}; }
};

/// An element of storage type T as the f32 the kernels compute in, and back.
template <class T> __device__ inline float load(const T *p) { return static_cast<float>(*p); }
template <class T> __device__ inline void store(T *p, float v) { *p = static_cast<T>(v); }

/// The same through operands of a type known per call (ConstFloats, Floats): the kernels are
/// templates over their operands, instantiated with plain f32 pointers where every operand of
/// a call is f32, else with these, whose element type is one branch that every thread of a
/// launch takes alike. A store rounds to nearest even, as cuda::narrow does.
__device__ inline float load(ConstFloats p) {
  switch (p.type) {
  case DType::BF16:
    return __bfloat162float(*static_cast<const __nv_bfloat16 *>(p.data));
  case DType::F16:
    return __half2float(*static_cast<const __half *>(p.data));
  default:
    return *static_cast<const float *>(p.data);
  }
}
__device__ inline float load(Floats p) { return load(ConstFloats(p)); }
__device__ inline void store(Floats p, float v) {
  switch (p.type) {
  case DType::BF16:
    *static_cast<__nv_bfloat16 *>(p.data) = __float2bfloat16_rn(v);
    return;
  case DType::F16:
    *static_cast<__half *>(p.data) = __float2half_rn(v);
    return;
  default:
    *static_cast<float *>(p.data) = v;
  }
}

/// Whether every operand of a call is f32, so that its kernel runs on plain pointers.
template <class... Operands> inline bool allF32(const Operands &...operands) {
  return ((operands.type == DType::F32) && ...);
}
/// An f32 operand's pointer (allF32 said it is one).
inline const float *f32(ConstFloats p) { return static_cast<const float *>(p.data); }
inline float *f32(Floats p) { return static_cast<float *>(p.data); }

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
template <class In> __device__ inline float2 rowMaxAndSumExp(int64_t cols, In xr, float *scratch) {
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

namespace tessel::cuda {

/// Element k of an operand, as a pointer's `p + k` is (found by argument-dependent lookup
/// from the kernels, whose operands may be either).
__device__ inline ConstFloats operator+(ConstFloats p, int64_t k) {
  return ConstFloats(static_cast<const char *>(p.data) + k * elementBytes(p.type), p.type);
}
__device__ inline Floats operator+(Floats p, int64_t k) {
  return Floats(static_cast<char *>(p.data) + k * elementBytes(p.type), p.type);
}

} // namespace tessel::cuda

#endif // TESSEL_KERNELS_CUDA_COMMON_CUH
