//===- PagedAttention.cu - Attention of new tokens over paged caches ------===//
//
// The CPU counterpart is cpu::pagedAttention (kernels/cpu/PagedAttention.cpp), with the same
// PagedAttentionArgs (kernels/KernelTypes.h). Split over the keys ("flash decoding"), in three
// launches on the stream:
// - store: every new token's key and value rows go to their cache slots, before anything
//   reads the caches (a prefill chunk's tokens see each other);
// - parts: the positions a token sees are cut into parts of `length` positions; one block per
//   (token, query head, part) of kWarps warps, each warp taking groups of kStep consecutive
//   positions in turn with the query in registers (lane l holds features l, l + 32, ...) and a
//   running maximum, sum and output, rescaled when the maximum grows. The warps' states are
//   merged in shared memory, and the part's (maximum, sum, unnormalised output) written to f32
//   workspace;
// - merge: one block per (token, query head) combines its parts by their maxima and writes the
//   output.
// Where one part covers every position (enough tokens and heads to fill the device, or short
// caches) the parts kernel writes the output itself and there is no workspace. The parts
// depend on the sizes alone, never on the positions, so every run adds in the same order.
//
// Operands of one element type run on plain pointers of that type (f32, bf16 or f16: a 16-bit
// cache is read and written as it is, never widened whole); a call mixing types reads each at
// its own (ConstFloats). Every kernel computes in f32.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessel::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
/// Consecutive positions a warp scores at once (their loads and sums overlap).
constexpr int kStep = 4;
/// Features per lane: a head of up to kMaxAttentionHead.
constexpr int kPerLane = static_cast<int>(kMaxAttentionHead) / 32;
/// Parts are at least this long where the device has blocks enough...
constexpr int64_t kMinPart = 256;
/// ...and no more numerous than fill it: (token, head, part) blocks of the parts kernel.
constexpr int64_t kTargetBlocks = 1024;

/// How the positions a token sees are cut: `count` parts of `length` positions, the first
/// starting at the token's first position.
struct Parts {
  int64_t count = 1, length = 0;
};

Parts partsOf(const PagedAttentionArgs &a) {
  // The most positions any token sees: every slot its block table row names, or its window.
  int64_t span = a.maxBlocks * a.blockSize;
  if (a.window > 0)
    span = std::min(span, a.window);
  const int64_t pairs = a.batch * a.seq * a.heads;
  const int64_t fill = std::max<int64_t>(1, kTargetBlocks / pairs);
  Parts parts;
  parts.count = std::max<int64_t>(1, std::min((span + kMinPart - 1) / kMinPart, fill));
  // Whole groups of the warps' steps per part; the count again, for the rounded length.
  constexpr int64_t kAlign = int64_t(kWarps) * kStep;
  parts.length = ((span + parts.count - 1) / parts.count + kAlign - 1) / kAlign * kAlign;
  parts.count = (span + parts.length - 1) / parts.length;
  return parts;
}

__device__ inline int64_t imin(int64_t x, int64_t y) { return x < y ? x : y; }
__device__ inline int64_t imax(int64_t x, int64_t y) { return x > y ? x : y; }

/// The cache row (block × blockSize + slot) holding position p of the sequence whose block
/// table row is `row`; -1 where the position lies past the row or the row names no block of the
/// caches (the caller's error). Positions are i32 (and the launcher keeps every position a
/// table row can name in i32), so the divisions are 32-bit.
__device__ inline int64_t cacheRowOf(const PagedAttentionArgs &a, const int32_t *row, int64_t p) {
  const int position = static_cast<int>(p), size = static_cast<int>(a.blockSize);
  const int index = position / size;
  if (index >= a.maxBlocks)
    return -1;
  const int32_t block = row[index];
  if (block < 0 || block >= a.blocks)
    return -1;
  return int64_t(block) * size + (position - index * size);
}

/// One thread per element of the new keys and values: each to its token's slot.
template <class In, class Out>
__global__ void storeKernel(PagedAttentionArgs a, In k, In v, const int32_t *positions,
                            const int32_t *table, Out kCache, Out vCache) {
  const int64_t width = a.kvHeads * a.head, total = a.batch * a.seq * width;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t token = e / width, p = positions[token];
    if (p < 0)
      continue;
    const int64_t cacheRow = cacheRowOf(a, table + token / a.seq * a.maxBlocks, p);
    if (cacheRow < 0)
      continue;
    const int64_t at = cacheRow * width + e % width;
    detail::store(kCache + at, detail::load(k + e));
    detail::store(vCache + at, detail::load(v + e));
  }
}

/// Grid (tokens, heads, parts). With one part, writes the output; else the part's maximum,
/// sum (-1 where the token reaches a block out of range) and unnormalised output to
/// partials[((token * heads + h) * parts + part) * (head + 2) ...].
template <class In, class Out>
__global__ void __launch_bounds__(kThreads)
    partsKernel(PagedAttentionArgs a, Parts parts, In q, In kCache, In vCache,
                const int32_t *positions, const int32_t *table, Out out, float *partials) {
  __shared__ float maxOfWarp[kWarps], sumOfWarp[kWarps];
  __shared__ float outOfWarp[kWarps][kMaxAttentionHead];
  __shared__ int bad;
  const int64_t token = blockIdx.x, h = blockIdx.y, part = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t D = a.head, kvHead = h / (a.heads / a.kvHeads);
  const int64_t p = positions[token];
  if (threadIdx.x == 0)
    bad = 0;
  __syncthreads();

  // This part's positions, [begin, end): none for a padding token.
  int64_t begin = 0, end = 0;
  if (p >= 0) {
    begin = (a.window > 0 ? imax(0, p - a.window + 1) : 0) + part * parts.length;
    end = imin(p + 1, begin + parts.length);
  }
  float qr[kPerLane];
  const In qh = q + (token * a.heads + h) * D;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qr[i] = d < D ? detail::load(qh + d) : 0.0f;
  }
  const int32_t *row = table + token / a.seq * a.maxBlocks;
  float m = -INFINITY, l = 0.0f, acc[kPerLane] = {};
  // Every lane of a warp takes the same positions, so the warp's shuffles see all its lanes.
  for (int64_t j0 = begin + int64_t(warp) * kStep; j0 < end; j0 += int64_t(kWarps) * kStep) {
    int64_t at[kStep];
    bool seen[kStep];
    float s[kStep];
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      const int64_t j = j0 + u;
      const int64_t cacheRow = j < end ? cacheRowOf(a, row, j) : -1;
      seen[u] = cacheRow >= 0;
      if (j < end && cacheRow < 0 && lane == 0)
        atomicOr(&bad, 1);
      at[u] = seen[u] ? (cacheRow * a.kvHeads + kvHead) * D : 0;
    }
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      float partial = 0.0f;
      if (seen[u]) {
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const int64_t d = lane + 32 * i;
          if (d < D)
            partial += qr[i] * detail::load(kCache + (at[u] + d));
        }
      }
      const float score = detail::warpSum(partial);
      s[u] = seen[u] ? score * a.scale : -INFINITY;
    }
    float top = m;
#pragma unroll
    for (int u = 0; u < kStep; ++u)
      top = fmaxf(top, s[u]);
    if (top == -INFINITY)
      continue;
    // Rescale what the earlier positions added to the new maximum (exp(-inf) = 0 at the first).
    const float correction = expf(m - top);
    l *= correction;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      acc[i] *= correction;
#pragma unroll
    for (int u = 0; u < kStep; ++u) {
      if (!seen[u])
        continue;
      const float weight = expf(s[u] - top);
      l += weight;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int64_t d = lane + 32 * i;
        if (d < D)
          acc[i] += weight * detail::load(vCache + (at[u] + d));
      }
    }
    m = top;
  }

  // The warps' states merged by their maxima (a warp that saw nothing adds nothing).
  if (lane == 0) {
    maxOfWarp[warp] = m;
    sumOfWarp[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < D)
      outOfWarp[warp][d] = acc[i];
  }
  __syncthreads();
  float top = -INFINITY;
  for (int w = 0; w < kWarps; ++w)
    top = fmaxf(top, maxOfWarp[w]);
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    if (maxOfWarp[w] != -INFINITY)
      sum += sumOfWarp[w] * expf(maxOfWarp[w] - top);
  auto merged = [&](int64_t d) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (maxOfWarp[w] != -INFINITY)
        v += outOfWarp[w][d] * expf(maxOfWarp[w] - top);
    return v;
  };
  if (parts.count == 1) {
    // A padding token, one reaching a block out of range: a zero row.
    const bool zero = p < 0 || bad != 0 || !(sum > 0.0f);
    const Out o = out + (token * a.heads + h) * D;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
      detail::store(o + d, zero ? 0.0f : merged(d) / sum);
    return;
  }
  float *partial = partials + ((token * a.heads + h) * parts.count + part) * (D + 2);
  if (threadIdx.x == 0) {
    partial[0] = top;
    partial[1] = bad != 0 ? -1.0f : sum;
  }
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    partial[2 + d] = merged(d);
}

/// Grid (tokens, heads): the parts of one (token, head) merged by their maxima, in part order.
template <class Out>
__global__ void __launch_bounds__(kThreads)
    mergeKernel(PagedAttentionArgs a, Parts parts, const int32_t *positions, const float *partials,
                Out out) {
  const int64_t token = blockIdx.x, h = blockIdx.y, D = a.head, pitch = D + 2;
  const float *first = partials + (token * a.heads + h) * parts.count * pitch;
  bool zero = positions[token] < 0;
  float top = -INFINITY;
  for (int64_t part = 0; part < parts.count; ++part) {
    const float *x = first + part * pitch;
    zero = zero || x[1] < 0.0f;
    if (x[1] > 0.0f)
      top = fmaxf(top, x[0]);
  }
  float sum = 0.0f;
  for (int64_t part = 0; part < parts.count && !zero; ++part) {
    const float *x = first + part * pitch;
    if (x[1] > 0.0f)
      sum += x[1] * expf(x[0] - top);
  }
  zero = zero || !(sum > 0.0f);
  const Out o = out + (token * a.heads + h) * D;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float v = 0.0f;
    for (int64_t part = 0; part < parts.count && !zero; ++part) {
      const float *x = first + part * pitch;
      if (x[1] > 0.0f)
        v += x[2 + d] * expf(x[0] - top);
    }
    detail::store(o + d, zero ? 0.0f : v / sum);
  }
}

/// The three launches on operands read as In and written as Out.
template <class In, class Out>
cudaError_t launchAll(const PagedAttentionArgs &a, In q, In k, In v, const int32_t *positions,
                      const int32_t *table, Out out, Out kCache, Out vCache, float *workspace,
                      cudaStream_t stream) {
  const Parts parts = partsOf(a);
  const int64_t tokens = a.batch * a.seq;
  storeKernel<<<detail::mapBlocks(tokens * a.kvHeads * a.head), detail::kMapThreads, 0, stream>>>(
      a, k, v, positions, table, kCache, vCache);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(parts.count));
  partsKernel<<<grid, kThreads, 0, stream>>>(a, parts, q, In(kCache), In(vCache), positions, table,
                                             out, workspace);
  if (cudaError_t e = detail::launched(); e != cudaSuccess || parts.count == 1)
    return e;
  const dim3 pairs(static_cast<unsigned>(tokens), static_cast<unsigned>(a.heads));
  mergeKernel<<<pairs, kThreads, 0, stream>>>(a, parts, positions, workspace, out);
  return detail::launched();
}

/// An operand of a call whose operands are all of one type, as a plain pointer of it.
template <class T> const T *typed(ConstFloats p) { return static_cast<const T *>(p.data); }
template <class T> T *typed(Floats p) { return static_cast<T *>(p.data); }

template <class T>
cudaError_t launchTyped(const PagedAttentionArgs &a, ConstFloats q, ConstFloats k, ConstFloats v,
                        const int32_t *positions, const int32_t *table, Floats out, Floats kCache,
                        Floats vCache, float *workspace, cudaStream_t stream) {
  return launchAll(a, typed<T>(q), typed<T>(k), typed<T>(v), positions, table, typed<T>(out),
                   typed<T>(kCache), typed<T>(vCache), workspace, stream);
}

} // namespace

int64_t pagedAttentionWorkspace(const PagedAttentionArgs &a) {
  const Parts parts = partsOf(a);
  if (parts.count == 1)
    return 0;
  return a.batch * a.seq * a.heads * parts.count * (a.head + 2);
}

cudaError_t pagedAttention(const PagedAttentionArgs &a, ConstFloats q, ConstFloats k, ConstFloats v,
                           const int32_t *positions, const int32_t *blockTable, Floats out,
                           Floats kCache, Floats vCache, float *workspace, cudaStream_t stream) {
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      a.head > kMaxAttentionHead || a.heads % a.kvHeads != 0 || a.blocks <= 0 || a.blockSize <= 0 ||
      a.maxBlocks <= 0 || a.window < 0 || a.blocks > 0x7fffffff ||
      a.maxBlocks > 0x7fffffff / a.blockSize || a.batch * a.seq > 0x7fffffff || a.heads > 65535)
    return cudaErrorInvalidValue;
  const Parts parts = partsOf(a);
  if (parts.count > 65535 || (parts.count > 1 && !workspace))
    return cudaErrorInvalidValue;
  const DType t = q.type;
  if (k.type == t && v.type == t && out.type == t && kCache.type == t && vCache.type == t) {
    switch (t) {
    case DType::F32:
      return launchTyped<float>(a, q, k, v, positions, blockTable, out, kCache, vCache, workspace,
                                stream);
    case DType::BF16:
      return launchTyped<__nv_bfloat16>(a, q, k, v, positions, blockTable, out, kCache, vCache,
                                        workspace, stream);
    case DType::F16:
      return launchTyped<__half>(a, q, k, v, positions, blockTable, out, kCache, vCache, workspace,
                                 stream);
    case DType::I32: // not a float operand
      break;
    }
  }
  return launchAll(a, q, k, v, positions, blockTable, out, kCache, vCache, workspace, stream);
}

} // namespace tessel::cuda
