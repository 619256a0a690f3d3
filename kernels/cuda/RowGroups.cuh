//===- RowGroups.cuh - Rows read and written in groups of eight -*- CUDA -*-===//
//
// Private to kernels/cuda: the row kernels that stream long rows (cross entropy over a
// vocabulary) read them in groups of eight consecutive elements, thread t taking groups t,
// t + blockDim.x, ... A group is one 16-byte load for 16-bit elements and two for f32 where
// the rows allow it (vectorRows), else eight scalar loads; which elements a thread sees and the
// order it combines them in depend only on the row's length, never on the element type or the
// alignment, so an f32 run of widened 16-bit values gives the 16-bit run's bits.
//
// The row's softmax normaliser is taken in one pass (MaxSum): each thread keeps a running
// maximum and the sum of exp(x - maximum), rescaled when the maximum grows, and the block
// combines the threads' pairs in a fixed tree.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_ROWGROUPS_CUH
#define TESSEL_KERNELS_CUDA_ROWGROUPS_CUH

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda::detail {

constexpr int kGroup = 8;

/// Groups of eight in n elements.
__host__ __device__ inline int64_t groupsOf(int64_t n) { return (n + kGroup - 1) / kGroup; }
/// Elements of group g of a row of `cols`: eight but for the last group.
__host__ __device__ inline int groupCount(int64_t cols, int64_t g) {
  const int64_t left = cols - g * kGroup;
  return left < kGroup ? static_cast<int>(left) : kGroup;
}

/// Whether rows of `cols` elements of `bytes` each, from `base`, may be read and written with
/// 16-byte accesses: the base and every row start 16-byte aligned.
inline bool vectorRows(const void *base, int64_t cols, size_t bytes) {
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 &&
         (cols * static_cast<int64_t>(bytes)) % 16 == 0;
}

__device__ inline void widen(uint4 bits, const __nv_bfloat16 *, float (&v)[kGroup]) {
  const auto *h = reinterpret_cast<const __nv_bfloat162 *>(&bits);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ inline void widen(uint4 bits, const __half *, float (&v)[kGroup]) {
  const auto *h = reinterpret_cast<const __half2 *>(&bits);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

/// Group g of row `xr` (cols elements) into v; returns how many of its elements exist (8 but
/// for the last group). `vector`: what vectorRows said of the operand.
template <class T>
__device__ inline int loadGroup(const T *xr, int64_t cols, int64_t g, bool vector,
                                float (&v)[kGroup]) {
  const int64_t first = g * kGroup;
  const int count = groupCount(cols, g);
  if (vector && count == kGroup) {
    if constexpr (sizeof(T) == 4) {
      const float4 a = *reinterpret_cast<const float4 *>(xr + first);
      const float4 b = *reinterpret_cast<const float4 *>(xr + first + 4);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
      v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
      widen(*reinterpret_cast<const uint4 *>(xr + first), xr, v);
    }
    return kGroup;
  }
  for (int i = 0; i < count; ++i)
    v[i] = load(xr + (first + i));
  return count;
}
/// The same for an operand whose type is known per call: scalar loads.
__device__ inline int loadGroup(ConstFloats xr, int64_t cols, int64_t g, bool, float (&v)[kGroup]) {
  const int64_t first = g * kGroup;
  const int count = groupCount(cols, g);
  for (int i = 0; i < count; ++i)
    v[i] = load(xr + (first + i));
  return count;
}

/// The first `count` values of v into group g of row `yr`, rounded as store rounds.
template <class T>
__device__ inline void storeGroup(T *yr, int64_t g, int count, bool vector,
                                  const float (&v)[kGroup]) {
  const int64_t first = g * kGroup;
  if (vector && count == kGroup) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4 *>(yr + first) = make_float4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<float4 *>(yr + first + 4) = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      uint4 bits;
      T *h = reinterpret_cast<T *>(&bits);
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        store(h + i, v[i]);
      *reinterpret_cast<uint4 *>(yr + first) = bits;
    }
    return;
  }
  for (int i = 0; i < count; ++i)
    store(yr + (first + i), v[i]);
}
__device__ inline void storeGroup(Floats yr, int64_t g, int count, bool, const float (&v)[kGroup]) {
  const int64_t first = g * kGroup;
  for (int i = 0; i < count; ++i)
    store(yr + (first + i), v[i]);
}

/// A running softmax normaliser: the largest value seen and the sum of exp(x - max) over the
/// values seen. Values of -inf add nothing.
struct MaxSum {
  float max = -INFINITY;
  float sum = 0.0f;

  __device__ void add(const float (&v)[kGroup], int count) {
    float m = max;
    for (int i = 0; i < count; ++i)
      m = fmaxf(m, v[i]);
    if (m == -INFINITY)
      return;
    if (m > max) {
      sum *= expf(max - m); // 0 while max is -inf
      max = m;
    }
    for (int i = 0; i < count; ++i)
      sum += expf(v[i] - max);
  }
  __device__ void merge(float otherMax, float otherSum) {
    const float m = fmaxf(max, otherMax);
    if (m == -INFINITY)
      return;
    // Unfused and in commutative form, so both lanes of a shuffle get the same bits.
    sum = __fadd_rn(__fmul_rn(sum, expf(max - m)), __fmul_rn(otherSum, expf(otherMax - m)));
    max = m;
  }
};

/// The block's MaxSum over every thread's, returned to every thread; a fixed tree, so the same
/// bits on every run. `scratch` holds 64 floats of shared memory.
__device__ inline MaxSum blockMaxSum(MaxSum s, float *scratch) {
  for (int offset = 16; offset > 0; offset /= 2)
    s.merge(__shfl_xor_sync(0xffffffffu, s.max, offset),
            __shfl_xor_sync(0xffffffffu, s.sum, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0) {
    scratch[warp] = s.max;
    scratch[32 + warp] = s.sum;
  }
  __syncthreads();
  MaxSum t;
  if (lane < warps) {
    t.max = scratch[lane];
    t.sum = scratch[32 + lane];
  }
  for (int offset = 16; offset > 0; offset /= 2)
    t.merge(__shfl_xor_sync(0xffffffffu, t.max, offset),
            __shfl_xor_sync(0xffffffffu, t.sum, offset));
  return t;
}

/// Row `xr`'s MaxSum, every thread reading its groups.
template <class In>
__device__ inline MaxSum rowMaxSum(int64_t cols, In xr, bool vector, float *scratch) {
  MaxSum s;
  float v[kGroup];
  for (int64_t g = threadIdx.x; g < groupsOf(cols); g += blockDim.x)
    s.add(v, loadGroup(xr, cols, g, vector, v));
  return blockMaxSum(s, scratch);
}

/// An operand as the plain pointer of element type T (its type, checked by the caller).
template <class T> inline const T *typed(ConstFloats p) { return static_cast<const T *>(p.data); }
template <class T> inline T *typed(Floats p) { return static_cast<T *>(p.data); }

/// Calls launch(operands...) with the operands as the narrowest kernel takes them: plain
/// pointers of their element type where all share one, else typed per call (each element's
/// type a branch at run time).
template <class Launch, class First, class... Rest>
void withElementType(Launch launch, First first, Rest... rest) {
  if (((rest.type == first.type) && ...)) {
    switch (first.type) {
    case DType::BF16:
      return launch(typed<__nv_bfloat16>(first), typed<__nv_bfloat16>(rest)...);
    case DType::F16:
      return launch(typed<__half>(first), typed<__half>(rest)...);
    case DType::F32:
      return launch(typed<float>(first), typed<float>(rest)...);
    default:
      break;
    }
  }
  launch(first, rest...);
}

/// Whether every operand's rows (cols elements each) may be read with 16-byte accesses.
template <class... Operands> inline bool vectorOperands(int64_t cols, const Operands &...ops) {
  return (vectorRows(ops.data, cols, elementBytes(ops.type)) && ...);
}

/// Who works on a row of a row kernel: a warp (rows short enough that a block's threads
/// would mostly idle; kRowThreads / 32 rows a block) or the whole block (one row a block).
/// Either sums over its threads in a fixed tree that gives every thread the same bits.
struct WarpTeam {
  static constexpr int kRowsPerBlock = kRowThreads / 32;
  __device__ int64_t row() const { return blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32; }
  __device__ int lane() const { return threadIdx.x % 32; }
  __device__ int size() const { return 32; }
  __device__ float sum(float v, float *) const { return warpSum(v); }
};
struct BlockTeam {
  static constexpr int kRowsPerBlock = 1;
  __device__ int64_t row() const { return blockIdx.x; }
  __device__ int lane() const { return threadIdx.x; }
  __device__ int size() const { return blockDim.x; }
  __device__ float sum(float v, float *scratch) const { return blockSum(v, scratch); }
};
/// Rows up to this long go to a warp each.
constexpr int64_t kWarpRowCols = 4096;

/// Calls launch(team, blocks) with the team for rows of `cols` and the blocks for `rows`.
template <class Launch> void withRowTeam(int64_t rows, int64_t cols, Launch launch) {
  if (cols <= kWarpRowCols)
    launch(WarpTeam(),
           static_cast<unsigned>((rows + WarpTeam::kRowsPerBlock - 1) / WarpTeam::kRowsPerBlock));
  else
    launch(BlockTeam(), static_cast<unsigned>(rows));
}

} // namespace tessel::cuda::detail

#endif // TESSEL_KERNELS_CUDA_ROWGROUPS_CUH
