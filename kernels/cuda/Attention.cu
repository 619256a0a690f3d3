//===- Attention.cu - Tiled attention with an online softmax ---------------===//
//
// The CPU counterparts are cpu::attention and cpu::attentionGrad (kernels/cpu/Attention.cpp),
// with the same AttentionArgs: q and out are [batch, seq, heads, head], k and v [batch, kvSeq,
// kvHeads, head]; query head h is head firstHead + h of the whole and reads kv head
// (firstHead + h) / group; `causal` masks keys after the query, `window` those more than
// window - 1 before it.
//
// FlashAttention-2's scheme in f32, written for clarity first:
// - Forward: one block per (batch, head, kTile queries) walks the key tiles its queries can
//   see, keeping a running row maximum m, a running sum l of exp(s - m) and the output
//   accumulator in registers (rescaled when m grows). Probabilities are never stored. The
//   backward pass runs it again to recompute the output and each row's log-sum-exp, since a
//   plan keeps nothing between the two kernels.
// - Backward: delta = rowsum(dout * out); then dk and dv one block per (batch, kv head, kTile
//   keys), looping over the query heads that read that kv head and the query tiles that see
//   the keys, and dq one block per (batch, head, kTile queries) over its key tiles. Each output
//   element is written by one thread (no atomics): the same bits on every run.
//
// Threads: kThreads = 4 per tile row; a thread owns row t / 4 and, of the tile's columns or of
// the head's features, those congruent to t % 4 mod 4. The tiles live in shared memory with
// rows padded to head + 1 floats (no bank conflicts on column walks).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

constexpr int kTile = 32;
constexpr int kThreads = 4 * kTile;
/// Features per thread: a head of up to kMaxAttentionHead in slices of 4.
constexpr int kFeatures = static_cast<int>(kMaxAttentionHead) / 4;
/// Tile columns per thread.
constexpr int kColumns = kTile / 4;
constexpr int kScorePitch = kTile + 1;

__device__ inline int64_t imin(int64_t x, int64_t y) { return x < y ? x : y; }
__device__ inline int64_t imax(int64_t x, int64_t y) { return x > y ? x : y; }

__device__ inline int64_t groupOf(const AttentionArgs &a) {
  return a.group > 0 ? a.group : a.heads / a.kvHeads;
}

/// The position of query i in the keys' sequence: i, or under context parallelism (a
/// head-tail block, AttentionArgs::headStart) in one of its two runs.
__device__ inline int64_t positionOf(const AttentionArgs &a, int64_t i) {
  if (a.headStart < 0)
    return i;
  return i < a.seq / 2 ? a.headStart + i : a.tailStart + i - a.seq / 2;
}

/// The position of key j: j, or in a ring attention step (a head-tail block of keys,
/// AttentionArgs::keyHeadStart) in one of its two runs.
__device__ inline int64_t keyPositionOf(const AttentionArgs &a, int64_t j) {
  if (a.keyHeadStart < 0)
    return j;
  return j < a.kvSeq / 2 ? a.keyHeadStart + j : a.keyTailStart + j - a.kvSeq / 2;
}

/// Whether query i sees key j (both inside the sequences).
__device__ inline bool visible(const AttentionArgs &a, int64_t i, int64_t j) {
  if (i >= a.seq || j >= a.kvSeq)
    return false;
  if (!a.causal)
    return true;
  const int64_t p = positionOf(a, i), kp = keyPositionOf(a, j);
  return kp <= p && (a.window <= 0 || kp > p - a.window);
}

/// The key tiles queries [q0, q0 + kTile) see: [first tile's start, end).
__device__ inline void keyRange(const AttentionArgs &a, int64_t q0, int64_t &begin, int64_t &end) {
  if (a.headStart >= 0 || a.keyHeadStart >= 0) { // runs of positions: the mask decides
    begin = 0;
    end = a.kvSeq;
    return;
  }
  const int64_t last = imin(q0 + kTile, a.seq) - 1;
  end = a.causal ? imin(last + 1, a.kvSeq) : a.kvSeq;
  begin = a.causal && a.window > 0 ? imax(0, q0 - a.window + 1) : 0;
  begin = begin / kTile * kTile;
}

/// The query tiles that see keys [j0, j0 + kTile): [first tile's start, end).
__device__ inline void queryRange(const AttentionArgs &a, int64_t j0, int64_t &begin,
                                  int64_t &end) {
  if (a.headStart >= 0 || a.keyHeadStart >= 0) {
    begin = 0;
    end = a.seq;
    return;
  }
  begin = a.causal ? j0 / kTile * kTile : 0;
  const int64_t lastKey = imin(j0 + kTile, a.kvSeq) - 1;
  end = a.causal && a.window > 0 ? imin(a.seq, lastKey + a.window) : a.seq;
}

/// Loads rows [first, first + kTile) of a [*, rows, heads, head] tensor's head `h` of batch
/// `b` into a tile with row pitch head + 1; rows past `rows` are zero.
__device__ inline void loadTile(const float *x, int64_t b, int64_t rows, int64_t heads, int64_t h,
                                int64_t head, int64_t first, float *tile) {
  const int64_t pitch = head + 1;
  for (int64_t e = threadIdx.x; e < kTile * head; e += blockDim.x) {
    const int64_t r = e / head, d = e % head, row = first + r;
    tile[r * pitch + d] = row < rows ? x[((b * rows + row) * heads + h) * head + d] : 0.0f;
  }
}

__device__ inline float dot(const float *x, const float *y, int64_t n) {
  float sum = 0.0f;
  for (int64_t d = 0; d < n; ++d)
    sum += x[d] * y[d];
  return sum;
}

/// The sum and the maximum over the four threads of a tile row (neighbouring lanes).
__device__ inline float rowSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ inline float rowMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/// Grid (query tiles, heads, batch). Writes out and, where given, each row's lse (the log of
/// its softmax normaliser of the scaled scores) where `layout` places it.
__global__ void __launch_bounds__(kThreads)
    forwardKernel(AttentionArgs a, const float *q, const float *k, const float *v, float *out,
                  float *lse, detail::LseLayout layout) {
  extern __shared__ float shared[];
  const int64_t D = a.head, pitch = D + 1;
  float *qs = shared, *ks = qs + kTile * pitch, *vs = ks + kTile * pitch;
  float *ps = vs + kTile * pitch;
  const int64_t q0 = int64_t(blockIdx.x) * kTile, h = blockIdx.y, b = blockIdx.z;
  const int64_t kh = (a.firstHead + h) / groupOf(a);
  const int r = threadIdx.x / 4, lane = threadIdx.x % 4;
  const int64_t i = q0 + r;

  loadTile(q, b, a.seq, a.heads, h, D, q0, qs);
  float m = -INFINITY, l = 0.0f, acc[kFeatures];
#pragma unroll
  for (int u = 0; u < kFeatures; ++u)
    acc[u] = 0.0f;
  int64_t kBegin, kEnd;
  keyRange(a, q0, kBegin, kEnd);
  for (int64_t j0 = kBegin; j0 < kEnd; j0 += kTile) {
    __syncthreads(); // the previous tile is no longer read
    loadTile(k, b, a.kvSeq, a.kvHeads, kh, D, j0, ks);
    loadTile(v, b, a.kvSeq, a.kvHeads, kh, D, j0, vs);
    __syncthreads();
    float s[kColumns], tileMax = -INFINITY;
#pragma unroll
    for (int u = 0; u < kColumns; ++u) {
      const int c = lane + 4 * u;
      s[u] = visible(a, i, j0 + c) ? dot(qs + r * pitch, ks + c * pitch, D) * a.scale : -INFINITY;
      tileMax = fmaxf(tileMax, s[u]);
    }
    const float mNew = fmaxf(m, rowMax(tileMax));
    // No key seen yet: nothing to rescale, and exp(-inf - 0) = 0 for the masked scores.
    const float base = mNew == -INFINITY ? 0.0f : mNew;
    const float correction = expf(m - base);
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < kColumns; ++u) {
      const float p = expf(s[u] - base);
      ps[r * kScorePitch + lane + 4 * u] = p;
      sum += p;
    }
    l = l * correction + rowSum(sum);
    m = mNew;
    __syncwarp(); // the row's probabilities are written by the row's four lanes
#pragma unroll
    for (int u = 0; u < kFeatures; ++u) {
      const int64_t d = lane + 4 * u;
      if (d >= D)
        break;
      float pv = 0.0f;
      for (int c = 0; c < kTile; ++c)
        pv += ps[r * kScorePitch + c] * vs[c * pitch + d];
      acc[u] = acc[u] * correction + pv;
    }
  }
  if (i >= a.seq)
    return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float *o = out + ((b * a.seq + i) * a.heads + h) * D;
#pragma unroll
  for (int u = 0; u < kFeatures; ++u) {
    const int64_t d = lane + 4 * u;
    if (d >= D)
      break;
    o[d] = acc[u] * inv;
  }
  if (lse && lane == 0)
    lse[layout.at(b, h, i)] = m + logf(l);
}

/// delta[(b * heads + h) * seq + i] = sum over the row of dout * out.
__global__ void deltaKernel(AttentionArgs a, const float *dout, const float *out, float *delta) {
  const int64_t rows = a.batch * a.seq * a.heads;
  for (int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; row < rows;
       row += int64_t(gridDim.x) * blockDim.x) {
    // row = (b * seq + i) * heads + h
    const int64_t h = row % a.heads, i = (row / a.heads) % a.seq, b = row / (a.heads * a.seq);
    delta[(b * a.heads + h) * a.seq + i] = dot(dout + row * a.head, out + row * a.head, a.head);
  }
}

/// Grid (key tiles, kv heads, batch): dk and dv of the block's keys.
__global__ void __launch_bounds__(kThreads)
    keyGradKernel(AttentionArgs a, const float *q, const float *k, const float *v,
                  const float *dout, const float *lse, const float *delta, float *dk, float *dv,
                  bool accumulate) {
  extern __shared__ float shared[];
  const int64_t D = a.head, pitch = D + 1;
  float *ks = shared, *vs = ks + kTile * pitch, *qs = vs + kTile * pitch;
  float *dos = qs + kTile * pitch, *ps = dos + kTile * pitch, *dss = ps + kTile * kScorePitch;
  float *lses = dss + kTile * kScorePitch, *deltas = lses + kTile;
  const int64_t j0 = int64_t(blockIdx.x) * kTile, kh = blockIdx.y, b = blockIdx.z;
  const int c = threadIdx.x / 4, lane = threadIdx.x % 4;
  const int64_t j = j0 + c, group = groupOf(a);

  loadTile(k, b, a.kvSeq, a.kvHeads, kh, D, j0, ks);
  loadTile(v, b, a.kvSeq, a.kvHeads, kh, D, j0, vs);
  float accK[kFeatures], accV[kFeatures];
#pragma unroll
  for (int u = 0; u < kFeatures; ++u)
    accK[u] = accV[u] = 0.0f;
  // The query heads here that read this kv head (none: dk and dv stay zero).
  const int64_t hBegin = imax(0, kh * group - a.firstHead);
  const int64_t hEnd = imin(a.heads, (kh + 1) * group - a.firstHead);
  int64_t qBegin, qEnd;
  queryRange(a, j0, qBegin, qEnd);
  for (int64_t h = hBegin; h < hEnd; ++h)
    for (int64_t q0 = qBegin; q0 < qEnd; q0 += kTile) {
      __syncthreads();
      loadTile(q, b, a.seq, a.heads, h, D, q0, qs);
      loadTile(dout, b, a.seq, a.heads, h, D, q0, dos);
      if (threadIdx.x < kTile) {
        const int64_t i = q0 + threadIdx.x;
        const int64_t at = (b * a.heads + h) * a.seq + i;
        lses[threadIdx.x] = i < a.seq ? lse[at] : 0.0f;
        deltas[threadIdx.x] = i < a.seq ? delta[at] : 0.0f;
      }
      __syncthreads();
      // Column c of the tile's probabilities and score gradients, rows lane + 4u.
#pragma unroll
      for (int u = 0; u < kColumns; ++u) {
        const int rr = lane + 4 * u;
        float p = 0.0f, ds = 0.0f;
        if (visible(a, q0 + rr, j)) {
          p = expf(dot(qs + rr * pitch, ks + c * pitch, D) * a.scale - lses[rr]);
          const float dp = dot(dos + rr * pitch, vs + c * pitch, D);
          ds = p * (dp - deltas[rr]) * a.scale;
        }
        ps[rr * kScorePitch + c] = p;
        dss[rr * kScorePitch + c] = ds;
      }
      __syncwarp(); // column c is written by its four lanes
#pragma unroll
      for (int u = 0; u < kFeatures; ++u) {
        const int64_t d = lane + 4 * u;
        if (d >= D)
          break;
        float sumV = 0.0f, sumK = 0.0f;
        for (int rr = 0; rr < kTile; ++rr) {
          sumV += ps[rr * kScorePitch + c] * dos[rr * pitch + d];
          sumK += dss[rr * kScorePitch + c] * qs[rr * pitch + d];
        }
        accV[u] += sumV;
        accK[u] += sumK;
      }
    }
  if (j >= a.kvSeq)
    return;
  const int64_t row = ((b * a.kvSeq + j) * a.kvHeads + kh) * D;
#pragma unroll
  for (int u = 0; u < kFeatures; ++u) {
    const int64_t d = lane + 4 * u;
    if (d >= D)
      break;
    dk[row + d] = accumulate ? dk[row + d] + accK[u] : accK[u];
    dv[row + d] = accumulate ? dv[row + d] + accV[u] : accV[u];
  }
}

/// Grid (query tiles, heads, batch): dq of the block's queries.
__global__ void __launch_bounds__(kThreads)
    queryGradKernel(AttentionArgs a, const float *q, const float *k, const float *v,
                    const float *dout, const float *lse, const float *delta, float *dq,
                    bool accumulate) {
  extern __shared__ float shared[];
  const int64_t D = a.head, pitch = D + 1;
  float *qs = shared, *dos = qs + kTile * pitch, *ks = dos + kTile * pitch;
  float *vs = ks + kTile * pitch, *dss = vs + kTile * pitch;
  const int64_t q0 = int64_t(blockIdx.x) * kTile, h = blockIdx.y, b = blockIdx.z;
  const int64_t kh = (a.firstHead + h) / groupOf(a);
  const int r = threadIdx.x / 4, lane = threadIdx.x % 4;
  const int64_t i = q0 + r;
  const int64_t at = (b * a.heads + h) * a.seq + i;
  const float rowLse = i < a.seq ? lse[at] : 0.0f, rowDelta = i < a.seq ? delta[at] : 0.0f;

  loadTile(q, b, a.seq, a.heads, h, D, q0, qs);
  loadTile(dout, b, a.seq, a.heads, h, D, q0, dos);
  float acc[kFeatures];
#pragma unroll
  for (int u = 0; u < kFeatures; ++u)
    acc[u] = 0.0f;
  int64_t kBegin, kEnd;
  keyRange(a, q0, kBegin, kEnd);
  for (int64_t j0 = kBegin; j0 < kEnd; j0 += kTile) {
    __syncthreads();
    loadTile(k, b, a.kvSeq, a.kvHeads, kh, D, j0, ks);
    loadTile(v, b, a.kvSeq, a.kvHeads, kh, D, j0, vs);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kColumns; ++u) {
      const int c = lane + 4 * u;
      float ds = 0.0f;
      if (visible(a, i, j0 + c)) {
        const float p = expf(dot(qs + r * pitch, ks + c * pitch, D) * a.scale - rowLse);
        const float dp = dot(dos + r * pitch, vs + c * pitch, D);
        ds = p * (dp - rowDelta) * a.scale;
      }
      dss[r * kScorePitch + c] = ds;
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < kFeatures; ++u) {
      const int64_t d = lane + 4 * u;
      if (d >= D)
        break;
      float sum = 0.0f;
      for (int c = 0; c < kTile; ++c)
        sum += dss[r * kScorePitch + c] * ks[c * pitch + d];
      acc[u] += sum;
    }
  }
  if (i >= a.seq)
    return;
  float *out = dq + ((b * a.seq + i) * a.heads + h) * D;
#pragma unroll
  for (int u = 0; u < kFeatures; ++u) {
    const int64_t d = lane + 4 * u;
    if (d >= D)
      break;
    out[d] = accumulate ? out[d] + acc[u] : acc[u];
  }
}

/// Whether the sizes are ones the kernels take (those the CPU handler checks, and the head
/// and grid limits of this file).
bool valid(const AttentionArgs &a) {
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvSeq <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      a.head > kMaxAttentionHead || a.window < 0 || (a.window > 0 && !a.causal) ||
      (a.causal && a.headStart < 0 && a.keyHeadStart < 0 && a.kvSeq != a.seq) || a.firstHead < 0)
    return false;
  // Head-tail keys (a ring step): two runs of kvSeq / 2 positions of the whole sequence, as
  // the queries' two runs are.
  if (a.keyHeadStart >= 0 && (a.kvSeq % 2 != 0 || a.keyTailStart < 0 || a.headStart < 0 ||
                              a.seq % 2 != 0 || a.tailStart < 0))
    return false;
  // Head-tail queries with every key here: two runs of seq / 2 positions inside the keys'
  // sequence.
  if (a.headStart >= 0 && a.keyHeadStart < 0 &&
      (a.seq % 2 != 0 || a.tailStart < 0 || a.headStart + a.seq / 2 > a.kvSeq ||
       a.tailStart + a.seq / 2 > a.kvSeq))
    return false;
  const int64_t group = a.group > 0 ? a.group : a.heads / a.kvHeads;
  if (group <= 0 || (a.firstHead + a.heads - 1) / group >= a.kvHeads)
    return false;
  return a.heads <= 65535 && a.kvHeads <= 65535 && a.batch <= 65535;
}

unsigned tiles(int64_t n) { return static_cast<unsigned>((n + kTile - 1) / kTile); }

/// Dynamic shared memory of a kernel with `tiles` head-wide tiles and `scores` score tiles.
size_t sharedBytes(const AttentionArgs &a, int tiles, int scores, int rows) {
  return (static_cast<size_t>(tiles) * kTile * (a.head + 1) +
          static_cast<size_t>(scores) * kTile * kScorePitch + rows) *
         sizeof(float);
}

/// Lets `kernel` use `bytes` of dynamic shared memory (above 48 KiB needs asking).
template <class K> cudaError_t allowShared(K kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

/// A ring's running output and log-sum-exp before its first block: 0 and -inf.
__global__ void startKernel(int64_t rows, int64_t head, float *out, float *lse) {
  for (int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; row < rows;
       row += int64_t(gridDim.x) * blockDim.x) {
    lse[row] = -INFINITY;
    for (int64_t d = 0; d < head; ++d)
      out[row * head + d] = 0.0f;
  }
}

/// Merges a block's attention (blockOut [batch, seq, heads, head], blockLse [batch, heads,
/// seq] as forwardKernel writes it) into the running out and lse ([batch, seq, heads]) as
/// cpu::attentionBlock does: with m = max(lse, lse_b), lse' = m + log(e^(lse - m) +
/// e^(lse_b - m)) and out' the two outputs weighted by e^(lse - lse') and e^(lse_b - lse'). A
/// query that saw no key of the block (lse_b = -inf) keeps its running values.
__global__ void mergeKernel(AttentionArgs a, const float *blockOut, const float *blockLse,
                            float *out, float *lse) {
  const int64_t rows = a.batch * a.seq * a.heads;
  for (int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; row < rows;
       row += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = row % a.heads, i = (row / a.heads) % a.seq, b = row / (a.heads * a.seq);
    const float block = blockLse[(b * a.heads + h) * a.seq + i];
    if (block == -INFINITY)
      continue;
    const float old = lse[row], m = fmaxf(old, block);
    const float wOld = old == -INFINITY ? 0.0f : expf(old - m), wBlock = expf(block - m);
    const float total = wOld + wBlock;
    for (int64_t d = 0; d < a.head; ++d)
      out[row * a.head + d] =
          (out[row * a.head + d] * wOld + blockOut[row * a.head + d] * wBlock) / total;
    lse[row] = m + logf(total);
  }
}

/// The backward rows from a finished forward pass (the plan's saved output and lse, or a ring's
/// whole attention's): the lse ([batch, seq, heads]) in the gradient kernels' order [batch,
/// heads, seq], and delta = sum over the row of dout * out.
__global__ void savedRowsKernel(AttentionArgs a, const float *dout, const float *out,
                                const float *lse, float *headLse, float *delta) {
  const int64_t rows = a.batch * a.seq * a.heads;
  for (int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; row < rows;
       row += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = row % a.heads, i = (row / a.heads) % a.seq, b = row / (a.heads * a.seq);
    const int64_t at = (b * a.heads + h) * a.seq + i;
    headLse[at] = lse[row];
    delta[at] = dot(dout + row * a.head, out + row * a.head, a.head);
  }
}

/// dk and dv, then dq, from each row's log-sum-exp and delta (both [batch, heads, seq]):
/// written, or added to what is there with `accumulate` (a ring step).
cudaError_t gradients(const AttentionArgs &a, const float *q, const float *k, const float *v,
                      const float *dout, const float *lse, const float *delta, float *dq,
                      float *dk, float *dv, bool accumulate, cudaStream_t stream);

cudaError_t forward(const AttentionArgs &a, const float *q, const float *k, const float *v,
                    float *out, float *lse, detail::LseLayout layout, cudaStream_t stream) {
  const size_t bytes = sharedBytes(a, 3, 1, 0);
  if (cudaError_t e = allowShared(forwardKernel, bytes); e != cudaSuccess)
    return e;
  const dim3 grid(tiles(a.seq), static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
  forwardKernel<<<grid, kThreads, bytes, stream>>>(a, q, k, v, out, lse, layout);
  return detail::launched();
}

} // namespace

cudaError_t attention(const AttentionArgs &args, const float *q, const float *k, const float *v,
                      float *out, float *lse, cudaStream_t stream) {
  if (!valid(args))
    return cudaErrorInvalidValue;
  return forward(args, q, k, v, out, lse, detail::LseLayout::rowMajor(args), stream);
}

int64_t attentionGradWorkspace(const AttentionArgs &a, bool saved) {
  return a.batch * a.seq * a.heads * ((saved ? 0 : a.head) + 2);
}

cudaError_t attentionGrad(const AttentionArgs &a, const float *q, const float *k, const float *v,
                          const float *dout, const float *savedOut, const float *savedLse,
                          float *dq, float *dk, float *dv, float *workspace, cudaStream_t stream) {
  if (!valid(a) || !workspace || !savedOut != !savedLse)
    return cudaErrorInvalidValue;
  // The recomputed output (without the saved one), then each row's lse and delta.
  const int64_t rows = a.batch * a.seq * a.heads;
  float *out = workspace, *lse = out + (savedOut ? 0 : rows * a.head), *delta = lse + rows;
  if (savedOut) {
    savedRowsKernel<<<detail::mapBlocks(rows), detail::kMapThreads, 0, stream>>>(
        a, dout, savedOut, savedLse, lse, delta);
    if (cudaError_t e = detail::launched(); e != cudaSuccess)
      return e;
    return gradients(a, q, k, v, dout, lse, delta, dq, dk, dv, false, stream);
  }
  if (cudaError_t e = forward(a, q, k, v, out, lse, detail::LseLayout::headMajor(a), stream);
      e != cudaSuccess)
    return e;
  deltaKernel<<<detail::mapBlocks(rows), detail::kMapThreads, 0, stream>>>(a, dout, out, delta);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  return gradients(a, q, k, v, dout, lse, delta, dq, dk, dv, false, stream);
}

int64_t attentionBlockWorkspace(const AttentionArgs &a) {
  return a.batch * a.seq * a.heads * (a.head + 1);
}

cudaError_t attentionBlock(const AttentionArgs &a, const float *q, const float *k, const float *v,
                           bool first, float *out, float *lse, float *workspace,
                           cudaStream_t stream) {
  if (!valid(a) || a.keyHeadStart < 0 || a.headStart < 0 || !workspace)
    return cudaErrorInvalidValue;
  const int64_t rows = a.batch * a.seq * a.heads;
  if (first) {
    startKernel<<<detail::mapBlocks(rows), detail::kMapThreads, 0, stream>>>(rows, a.head, out,
                                                                             lse);
    if (cudaError_t e = detail::launched(); e != cudaSuccess)
      return e;
  }
  float *blockOut = workspace, *blockLse = blockOut + rows * a.head;
  if (cudaError_t e = forward(a, q, k, v, blockOut, blockLse, detail::LseLayout::headMajor(a),
                             stream);
      e != cudaSuccess)
    return e;
  mergeKernel<<<detail::mapBlocks(rows), detail::kMapThreads, 0, stream>>>(a, blockOut, blockLse,
                                                                           out, lse);
  return detail::launched();
}

int64_t attentionBlockGradWorkspace(const AttentionArgs &a) {
  return 2 * a.batch * a.seq * a.heads;
}

cudaError_t attentionBlockGrad(const AttentionArgs &a, const float *q, const float *k,
                               const float *v, const float *dout, const float *out,
                               const float *lse, bool first, float *dq, float *dk, float *dv,
                               float *workspace, cudaStream_t stream) {
  if (!valid(a) || a.keyHeadStart < 0 || a.headStart < 0 || !workspace)
    return cudaErrorInvalidValue;
  if (first) {
    const size_t qBytes = sizeof(float) * a.batch * a.seq * a.heads * a.head;
    const size_t kvBytes = sizeof(float) * a.batch * a.kvSeq * a.kvHeads * a.head;
    float *const zeroed[] = {dq, dk, dv};
    const size_t bytes[] = {qBytes, kvBytes, kvBytes};
    for (int t = 0; t < 3; ++t)
      if (cudaError_t e = cudaMemsetAsync(zeroed[t], 0, bytes[t], stream); e != cudaSuccess)
        return e;
  }
  const int64_t rows = a.batch * a.seq * a.heads;
  float *headLse = workspace, *delta = headLse + rows;
  savedRowsKernel<<<detail::mapBlocks(rows), detail::kMapThreads, 0, stream>>>(a, dout, out, lse,
                                                                               headLse, delta);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  return gradients(a, q, k, v, dout, headLse, delta, dq, dk, dv, true, stream);
}

namespace {

cudaError_t gradients(const AttentionArgs &a, const float *q, const float *k, const float *v,
                      const float *dout, const float *lse, const float *delta, float *dq,
                      float *dk, float *dv, bool accumulate, cudaStream_t stream) {
  const size_t keyBytes = sharedBytes(a, 4, 2, 2 * kTile);
  if (cudaError_t e = allowShared(keyGradKernel, keyBytes); e != cudaSuccess)
    return e;
  const dim3 keyGrid(tiles(a.kvSeq), static_cast<unsigned>(a.kvHeads),
                     static_cast<unsigned>(a.batch));
  keyGradKernel<<<keyGrid, kThreads, keyBytes, stream>>>(a, q, k, v, dout, lse, delta, dk, dv,
                                                         accumulate);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  const size_t queryBytes = sharedBytes(a, 4, 1, 0);
  if (cudaError_t e = allowShared(queryGradKernel, queryBytes); e != cudaSuccess)
    return e;
  const dim3 queryGrid(tiles(a.seq), static_cast<unsigned>(a.heads),
                       static_cast<unsigned>(a.batch));
  queryGradKernel<<<queryGrid, kThreads, queryBytes, stream>>>(a, q, k, v, dout, lse, delta, dq,
                                                               accumulate);
  return detail::launched();
}

} // namespace

} // namespace tessel::cuda
