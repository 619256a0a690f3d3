//===- FlashAttention.cu - Attention on the tensor cores, 16-bit operands -===//
//
// FlashAttention-2's algorithm on bf16 or f16 q, k, v (and dout), with the products on the
// tensor cores (mma.sync m16n8k16, f32 accumulation): the kernels a mixed-precision plan's
// attention and attention_grad calls run where their sizes allow (flashAttentionTakes), with
// the meaning of Attention.cu's f32 kernels (the same AttentionArgs: causal, sliding window,
// GQA, a block of query heads; not context parallelism's head-tail positions).
//
// - Forward: one block of 4 warps per (64 queries, head, batch); each warp owns 16 query rows,
//   holds their q fragments in registers and walks the key tiles (64 keys) its block can see:
//   s = q kᵀ on the tensor cores, the causal and window mask, an online softmax in registers
//   (running maximum and sum per row, in base 2), then o += p v with p rounded to the operand
//   type in registers, as FlashAttention-2 does. Keys are staged in shared memory row-major,
//   values transposed, so every fragment load is one 32-bit word per register.
// - Backward: each row's log-sum-exp and the output from the forward call where the plan kept
//   them (`lse`, [batch, seq, heads]), else the forward pass again; delta = rowsum(dout · out);
//   then dk and dv one block per
//   (64 keys, kv head, batch) over the query heads of the kv head and the query tiles that see
//   the keys, and dq one block per (64 queries, head, batch) over its key tiles. Every output
//   element is summed by one thread in a fixed order (no atomics), so a run gives the same bits
//   every time.
//
// Shared-memory rows are padded by 8 elements (16 bytes), which puts the 8 rows a fragment load
// reads in different banks. Products accumulate in f32; p and ds are rounded to the operand
// type before their products (FlashAttention-2's precision), which the tests bound against the
// f32 kernels.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/FlashAttentionTiles.cuh"

namespace tessel::cuda {

namespace {

using namespace flash;

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <int D> constexpr size_t forwardShared() {
  return sizeof(uint16_t) * ((kRows + kKeys) * (D + kPad) + D * (kKeys + kPad));
}

/// out (and, when given, each row's lse in natural log, where `layout` places it) for 64
/// queries of one head.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    forwardKernel(AttentionArgs a, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                  uint16_t *out, float *lse, detail::LseLayout layout) {
  extern __shared__ uint4 sharedWords[];
  constexpr int P = D + kPad, PT = kKeys + kPad;
  uint16_t *qs = reinterpret_cast<uint16_t *>(sharedWords);
  uint16_t *ks = qs + kRows * P, *vt = ks + kKeys * P;
  // The last query tiles see the most keys: they start first.
  const int64_t q0 = int64_t(gridDim.x - 1 - blockIdx.x) * kRows;
  const int64_t h = blockIdx.y, b = blockIdx.z, kh = (a.firstHead + h) / groupOf(a);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;

  loadRows<D>(q, b, a.seq, a.heads, h, q0, kRows, qs);
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    loadA(qs, P, warp * 16, kk * 16, qf[kk]);

  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  const float scale2 = a.scale * kLog2e;
  const int64_t i0 = q0 + warp * 16 + g;
  int64_t begin, end;
  keyRange(a, q0, begin, end);
  for (int64_t k0 = begin; k0 < end; k0 += kKeys) {
    __syncthreads();
    loadRows<D>(k, b, a.kvSeq, a.kvHeads, kh, k0, kKeys, ks);
    loadRowsTransposed<D>(v, b, a.kvSeq, a.kvHeads, kh, k0, kKeys, vt);
    __syncthreads();
    float s[kKeys / 8][4] = {};
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t b0, b1;
        loadB(ks, P, nt * 8, kk * 16, b0, b1);
        Mma<T>::run(s[nt], qf[kk], b0, b1);
      }
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t i = i0 + 8 * (e >> 1), j = k0 + nt * 8 + 2 * t + (e & 1);
        s[nt][e] = visible(a, i, j) ? s[nt][e] * scale2 : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
      }
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      // A row that has seen no key yet keeps m = -inf: exp2(-inf - 0) = 0 for its entries.
      base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
      alpha[r] = exp2f(m[r] - base[r]);
      m[r] = mx[r];
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = exp2f(s[nt][e] - base[e >> 1]);
        l[e >> 1] += s[nt][e];
      }
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= alpha[0];
      o[dt][1] *= alpha[0];
      o[dt][2] *= alpha[1];
      o[dt][3] *= alpha[1];
    }
    scoresTimesTile<T>(o, s, vt, PT);
  }
  // Each of a row's four threads summed its own columns.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  storeRows<T, D>(o, l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f, out, b,
                  a.seq, a.heads, h, i0);
  if (lse && t == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t i = i0 + 8 * r;
      if (i < a.seq)
        lse[layout.at(b, h, i)] = l[r] > 0.0f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
    }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// delta [batch, heads, seq] = the sum over a row of dout · out: one warp per row. With the
/// forward call's `savedLse` ([batch, seq, heads]), also its rows in the gradient kernels' order
/// into `lse` [batch, heads, seq].
template <class T, int D>
__global__ void deltaKernel(AttentionArgs a, const uint16_t *dout, const uint16_t *out,
                            float *delta, const float *savedLse, float *lse) {
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.batch * a.seq * a.heads)
    return;
  float sum = 0.0f;
  for (int d = lane; d < D; d += 32)
    sum += Mma<T>::widen(dout[row * D + d]) * Mma<T>::widen(out[row * D + d]);
  sum = detail::warpSum(sum);
  if (lane == 0) {
    const int64_t h = row % a.heads, i = (row / a.heads) % a.seq, b = row / (a.heads * a.seq);
    delta[(b * a.heads + h) * a.seq + i] = sum;
    if (savedLse)
      lse[(b * a.heads + h) * a.seq + i] = savedLse[row];
  }
}

/// Queries per tile of the dk/dv kernel: fewer at the widest head, for its registers.
template <int D> __host__ __device__ constexpr int keyGradQueries() { return D >= 128 ? 32 : 64; }

template <int D> constexpr size_t keyGradShared() {
  constexpr int QT = keyGradQueries<D>();
  return sizeof(uint16_t) * (2 * kRows * (D + kPad) + 2 * QT * (D + kPad) + 2 * D * (QT + kPad)) +
         sizeof(float) * 2 * QT;
}

/// dk and dv of 64 keys of one kv head: the sums over the query heads that read it and the
/// queries that see the keys. Each warp owns 16 keys and works on transposed scores sᵀ.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    keyGradKernel(AttentionArgs a, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                  const uint16_t *dout, const float *lse, const float *delta, uint16_t *dk,
                  uint16_t *dv) {
  extern __shared__ uint4 sharedWords[];
  constexpr int QT = keyGradQueries<D>(), P = D + kPad, PQ = QT + kPad;
  uint16_t *ks = reinterpret_cast<uint16_t *>(sharedWords);
  uint16_t *vs = ks + kRows * P, *qs = vs + kRows * P, *dos = qs + QT * P;
  uint16_t *qt = dos + QT * P, *dot = qt + D * PQ;
  float *rowLse = reinterpret_cast<float *>(dot + D * PQ), *rowDelta = rowLse + QT;
  const int64_t j0 = int64_t(blockIdx.x) * kRows, kh = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const float scale2 = a.scale * kLog2e;

  loadRows<D>(k, b, a.kvSeq, a.kvHeads, kh, j0, kRows, ks);
  loadRows<D>(v, b, a.kvSeq, a.kvHeads, kh, j0, kRows, vs);
  float dka[D / 8][4] = {}, dva[D / 8][4] = {};
  const int64_t jr = j0 + warp * 16 + g;
  const int64_t group = groupOf(a);
  const int64_t hBegin = imax(0, kh * group - a.firstHead);
  const int64_t hEnd = imin(a.heads, (kh + 1) * group - a.firstHead);
  int64_t qBegin, qEnd;
  queryRange(a, j0, QT, qBegin, qEnd);
  for (int64_t h = hBegin; h < hEnd; ++h)
    for (int64_t i0 = qBegin; i0 < qEnd; i0 += QT) {
      __syncthreads();
      loadRows<D>(q, b, a.seq, a.heads, h, i0, QT, qs);
      loadRowsTransposed<D>(q, b, a.seq, a.heads, h, i0, QT, qt);
      loadRows<D>(dout, b, a.seq, a.heads, h, i0, QT, dos);
      loadRowsTransposed<D>(dout, b, a.seq, a.heads, h, i0, QT, dot);
      for (int r = threadIdx.x; r < QT; r += blockDim.x) {
        const int64_t i = i0 + r, at = (b * a.heads + h) * a.seq + i;
        rowLse[r] = i < a.seq ? lse[at] * kLog2e : 0.0f;
        rowDelta[r] = i < a.seq ? delta[at] : 0.0f;
      }
      __syncthreads();
      // sᵀ = k qᵀ, then pᵀ = exp(sᵀ · scale - lse) where the query sees the key.
      float st[QT / 8][4] = {};
      rowsTimesRows<T, QT / 8, D>(st, ks, P, warp * 16, qs, P);
#pragma unroll
      for (int nt = 0; nt < QT / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = nt * 8 + 2 * t + (e & 1);
          const int64_t j = jr + 8 * (e >> 1), i = i0 + col;
          st[nt][e] = visible(a, i, j) ? exp2f(st[nt][e] * scale2 - rowLse[col]) : 0.0f;
        }
      // dv += pᵀ dout.
      scoresTimesTile<T>(dva, st, dot, PQ);
      // dpᵀ = v doutᵀ; dsᵀ = pᵀ (dpᵀ - delta).
      float dpt[QT / 8][4] = {};
      rowsTimesRows<T, QT / 8, D>(dpt, vs, P, warp * 16, dos, P);
#pragma unroll
      for (int nt = 0; nt < QT / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          st[nt][e] *= dpt[nt][e] - rowDelta[nt * 8 + 2 * t + (e & 1)];
      // dk += dsᵀ q (times the scale, at the end).
      scoresTimesTile<T>(dka, st, qt, PQ);
    }
  storeRows<T, D>(dka, a.scale, a.scale, dk, b, a.kvSeq, a.kvHeads, kh, jr);
  storeRows<T, D>(dva, 1.0f, 1.0f, dv, b, a.kvSeq, a.kvHeads, kh, jr);
}

template <int D> constexpr size_t queryGradShared() {
  return sizeof(uint16_t) * (2 * kRows * (D + kPad) + 2 * kKeys * (D + kPad) + D * (kKeys + kPad));
}

/// dq of 64 queries of one head, over the key tiles they see.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    queryGradKernel(AttentionArgs a, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                    const uint16_t *dout, const float *lse, const float *delta, uint16_t *dq) {
  extern __shared__ uint4 sharedWords[];
  constexpr int P = D + kPad, PT = kKeys + kPad;
  uint16_t *qs = reinterpret_cast<uint16_t *>(sharedWords);
  uint16_t *dos = qs + kRows * P, *ks = dos + kRows * P, *vs = ks + kKeys * P;
  uint16_t *kt = vs + kKeys * P;
  const int64_t q0 = int64_t(gridDim.x - 1 - blockIdx.x) * kRows;
  const int64_t h = blockIdx.y, b = blockIdx.z, kh = (a.firstHead + h) / groupOf(a);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const float scale2 = a.scale * kLog2e;

  loadRows<D>(q, b, a.seq, a.heads, h, q0, kRows, qs);
  loadRows<D>(dout, b, a.seq, a.heads, h, q0, kRows, dos);
  const int64_t i0 = q0 + warp * 16 + g;
  float rowLse[2], rowDelta[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = i0 + 8 * r, at = (b * a.heads + h) * a.seq + i;
    rowLse[r] = i < a.seq ? lse[at] * kLog2e : 0.0f;
    rowDelta[r] = i < a.seq ? delta[at] : 0.0f;
  }
  float dqa[D / 8][4] = {};
  int64_t begin, end;
  keyRange(a, q0, begin, end);
  for (int64_t k0 = begin; k0 < end; k0 += kKeys) {
    __syncthreads();
    loadRows<D>(k, b, a.kvSeq, a.kvHeads, kh, k0, kKeys, ks);
    loadRowsTransposed<D>(k, b, a.kvSeq, a.kvHeads, kh, k0, kKeys, kt);
    loadRows<D>(v, b, a.kvSeq, a.kvHeads, kh, k0, kKeys, vs);
    __syncthreads();
    // p = exp(q kᵀ · scale - lse) where the query sees the key.
    float s[kKeys / 8][4] = {};
    rowsTimesRows<T, kKeys / 8, D>(s, qs, P, warp * 16, ks, P);
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t i = i0 + 8 * (e >> 1), j = k0 + nt * 8 + 2 * t + (e & 1);
        s[nt][e] = visible(a, i, j) ? exp2f(s[nt][e] * scale2 - rowLse[e >> 1]) : 0.0f;
      }
    // dp = dout vᵀ; ds = p (dp - delta).
    float dp[kKeys / 8][4] = {};
    rowsTimesRows<T, kKeys / 8, D>(dp, dos, P, warp * 16, vs, P);
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        s[nt][e] *= dp[nt][e] - rowDelta[e >> 1];
    // dq += ds k (times the scale, at the end).
    scoresTimesTile<T>(dqa, s, kt, PT);
  }
  storeRows<T, D>(dqa, a.scale, a.scale, dq, b, a.seq, a.heads, h, i0);
}

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

template <class K> cudaError_t allowShared(K kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

unsigned tilesOf(int64_t n, int tile) { return static_cast<unsigned>((n + tile - 1) / tile); }

template <class T, int D>
cudaError_t forward(const AttentionArgs &a, const uint16_t *q, const uint16_t *k,
                    const uint16_t *v, uint16_t *out, float *lse, detail::LseLayout layout,
                    cudaStream_t stream) {
  constexpr size_t bytes = forwardShared<D>();
  if (cudaError_t e = allowShared(forwardKernel<T, D>, bytes); e != cudaSuccess)
    return e;
  const dim3 grid(tilesOf(a.seq, kRows), static_cast<unsigned>(a.heads),
                  static_cast<unsigned>(a.batch));
  forwardKernel<T, D><<<grid, kThreads, bytes, stream>>>(a, q, k, v, out, lse, layout);
  return detail::launched();
}

template <class T, int D>
cudaError_t backward(const AttentionArgs &a, const uint16_t *q, const uint16_t *k,
                     const uint16_t *v, const uint16_t *dout, const uint16_t *savedOut,
                     const float *savedLse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
                     void *workspace, cudaStream_t stream) {
  const int64_t rows = a.batch * a.seq * a.heads;
  // The recomputed output (without the saved one), then each row's lse and delta.
  auto *recomputed = static_cast<uint16_t *>(workspace);
  float *lse = reinterpret_cast<float *>(recomputed + (savedOut ? 0 : rows * D)),
        *delta = lse + rows;
  const uint16_t *out = savedOut;
  if (!out) {
    if (cudaError_t e = forward<T, D>(a, q, k, v, recomputed, lse,
                                      detail::LseLayout::headMajor(a), stream);
        e != cudaSuccess)
      return e;
    out = recomputed;
  }
  deltaKernel<T, D>
      <<<tilesOf(rows, kWarps), kThreads, 0, stream>>>(a, dout, out, delta, savedLse, lse);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  constexpr size_t keyBytes = keyGradShared<D>();
  if (cudaError_t e = allowShared(keyGradKernel<T, D>, keyBytes); e != cudaSuccess)
    return e;
  const dim3 keyGrid(tilesOf(a.kvSeq, kRows), static_cast<unsigned>(a.kvHeads),
                     static_cast<unsigned>(a.batch));
  keyGradKernel<T, D>
      <<<keyGrid, kThreads, keyBytes, stream>>>(a, q, k, v, dout, lse, delta, dk, dv);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  constexpr size_t queryBytes = queryGradShared<D>();
  if (cudaError_t e = allowShared(queryGradKernel<T, D>, queryBytes); e != cudaSuccess)
    return e;
  const dim3 queryGrid(tilesOf(a.seq, kRows), static_cast<unsigned>(a.heads),
                       static_cast<unsigned>(a.batch));
  queryGradKernel<T, D>
      <<<queryGrid, kThreads, queryBytes, stream>>>(a, q, k, v, dout, lse, delta, dq);
  return detail::launched();
}

/// forward and backward at the head size (flashAttentionTakes said it is taken).
template <class T>
cudaError_t forwardOfHead(const AttentionArgs &a, const uint16_t *q, const uint16_t *k,
                          const uint16_t *v, uint16_t *out, float *lse, cudaStream_t stream) {
  const detail::LseLayout layout = detail::LseLayout::rowMajor(a);
  switch (a.head) {
  case 32:
    return forward<T, 32>(a, q, k, v, out, lse, layout, stream);
  case 64:
    return forward<T, 64>(a, q, k, v, out, lse, layout, stream);
  case 128:
    return forward<T, 128>(a, q, k, v, out, lse, layout, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

template <class T>
cudaError_t backwardOfHead(const AttentionArgs &a, const uint16_t *q, const uint16_t *k,
                           const uint16_t *v, const uint16_t *dout, const uint16_t *out,
                           const float *lse, uint16_t *dq, uint16_t *dk, uint16_t *dv,
                           void *workspace, cudaStream_t stream) {
  switch (a.head) {
  case 32:
    return backward<T, 32>(a, q, k, v, dout, out, lse, dq, dk, dv, workspace, stream);
  case 64:
    return backward<T, 64>(a, q, k, v, dout, out, lse, dq, dk, dv, workspace, stream);
  case 128:
    return backward<T, 128>(a, q, k, v, dout, out, lse, dq, dk, dv, workspace, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

bool aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

} // namespace

bool flashAttentionTakes(const AttentionArgs &a) {
  if (a.head != 32 && a.head != 64 && a.head != 128)
    return false;
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvSeq <= 0 || a.kvHeads <= 0 ||
      a.window < 0 || (a.window > 0 && !a.causal) || (a.causal && a.kvSeq != a.seq) ||
      a.firstHead < 0 || a.headStart >= 0 || a.keyHeadStart >= 0)
    return false;
  const int64_t group = a.group > 0 ? a.group : a.heads / a.kvHeads;
  if (group <= 0 || (a.firstHead + a.heads - 1) / group >= a.kvHeads)
    return false;
  return a.heads <= 65535 && a.kvHeads <= 65535 && a.batch <= 65535;
}

cudaError_t flashAttention(DType type, const AttentionArgs &a, const uint16_t *q, const uint16_t *k,
                           const uint16_t *v, uint16_t *out, float *lse, cudaStream_t stream) {
  if (!flashAttentionTakes(a) || !aligned(q) || !aligned(k) || !aligned(v) || !aligned(out))
    return cudaErrorInvalidValue;
  return type == DType::BF16 ? forwardOfHead<__nv_bfloat16>(a, q, k, v, out, lse, stream)
                             : forwardOfHead<__half>(a, q, k, v, out, lse, stream);
}

int64_t flashAttentionGradWorkspaceBytes(const AttentionArgs &a, bool saved) {
  const int64_t rows = a.batch * a.seq * a.heads;
  return (saved ? 0 : rows * a.head * int64_t(sizeof(uint16_t))) +
         2 * rows * int64_t(sizeof(float));
}

cudaError_t flashAttentionGrad(DType type, const AttentionArgs &a, const uint16_t *q,
                               const uint16_t *k, const uint16_t *v, const uint16_t *dout,
                               const uint16_t *out, const float *lse, uint16_t *dq, uint16_t *dk,
                               uint16_t *dv, void *workspace, cudaStream_t stream) {
  if (!flashAttentionTakes(a) || !workspace || !aligned(workspace) || !out != !lse)
    return cudaErrorInvalidValue;
  for (const void *p : {static_cast<const void *>(q), static_cast<const void *>(k),
                        static_cast<const void *>(v), static_cast<const void *>(dout),
                        static_cast<const void *>(dq), static_cast<const void *>(dk),
                        static_cast<const void *>(dv), static_cast<const void *>(out)})
    if (p && !aligned(p))
      return cudaErrorInvalidValue;
  return type == DType::BF16
             ? backwardOfHead<__nv_bfloat16>(a, q, k, v, dout, out, lse, dq, dk, dv, workspace,
                                             stream)
             : backwardOfHead<__half>(a, q, k, v, dout, out, lse, dq, dk, dv, workspace, stream);
}

} // namespace tessel::cuda
