//===- FlashAttentionTiles.cuh - The attention kernels' tensor-core tiles -===//
//
// What FlashAttention.cu's kernels are built from: the block shape (4 warps of 16 rows, key
// tiles of 64, shared-memory rows padded by 8 elements so the 8 rows a fragment load reads sit
// in different banks), the mma.sync m16n8k16 product of each 16-bit type with f32
// accumulation, the causal and window masks and the key and query ranges they leave, the
// loads of rows (and of transposed rows) of q, k, v and dout into shared memory, and the tile
// products and stores of the online softmax.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_FLASHATTENTIONTILES_CUH
#define TESSEL_KERNELS_CUDA_FLASHATTENTIONTILES_CUH

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda::flash {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
/// Rows of a block: 16 per warp (a block's queries, or in dk/dv its keys).
constexpr int kRows = 16 * kWarps;
/// Keys per tile of the forward and dq kernels.
constexpr int kKeys = 64;
/// Padding of a shared-memory row, in elements.
constexpr int kPad = 8;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/// The tensor-core product of one element type: c += a b for a 16×16 a (four registers of two
/// elements, row-major fragment) and a 16×8 b (two registers, column-major fragment).
template <class T> struct Mma;

template <> struct Mma<__nv_bfloat16> {
  static __device__ inline uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
  }
  static __device__ inline float widen(uint16_t bits) {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
  static __device__ inline void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
  }
};

template <> struct Mma<__half> {
  static __device__ inline uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
  }
  static __device__ inline float widen(uint16_t bits) {
    return __half2float(__ushort_as_half(bits));
  }
  static __device__ inline void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
  }
};

__device__ inline int64_t imin(int64_t x, int64_t y) { return x < y ? x : y; }
__device__ inline int64_t imax(int64_t x, int64_t y) { return x > y ? x : y; }

__device__ inline int64_t groupOf(const AttentionArgs &a) {
  return a.group > 0 ? a.group : a.heads / a.kvHeads;
}

/// Whether query i sees key j (both inside their sequences).
__device__ inline bool visible(const AttentionArgs &a, int64_t i, int64_t j) {
  if (i >= a.seq || j >= a.kvSeq)
    return false;
  return !a.causal || (j <= i && (a.window <= 0 || j > i - a.window));
}

/// The keys queries [q0, q0 + kRows) see, as [begin, end) with begin a tile's start.
__device__ inline void keyRange(const AttentionArgs &a, int64_t q0, int64_t &begin,
                                int64_t &end) {
  const int64_t last = imin(q0 + kRows, a.seq) - 1;
  end = a.causal ? imin(last + 1, a.kvSeq) : a.kvSeq;
  begin = a.causal && a.window > 0 ? imax(0, q0 - a.window + 1) : 0;
  begin = begin / kKeys * kKeys;
}

/// The queries that see keys [j0, j0 + kRows), as [begin, end) with begin a multiple of tile.
__device__ inline void queryRange(const AttentionArgs &a, int64_t j0, int tile, int64_t &begin,
                                  int64_t &end) {
  begin = a.causal ? j0 / tile * tile : 0;
  const int64_t lastKey = imin(j0 + kRows, a.kvSeq) - 1;
  end = a.causal && a.window > 0 ? imin(a.seq, lastKey + a.window) : a.seq;
}

/// Rows [first, first + rows) of head h of batch b of a [batch, length, heads, D] tensor into
/// a row-major tile (pitch D + kPad); rows past `length` are zero. 16-byte loads and stores.
template <int D>
__device__ inline void loadRows(const uint16_t *x, int64_t b, int64_t length, int64_t heads,
                                int64_t h, int64_t first, int rows, uint16_t *tile) {
  constexpr int chunks = D / 8, pitch = D + kPad;
  for (int e = threadIdx.x; e < rows * chunks; e += blockDim.x) {
    const int r = e / chunks, c = e % chunks;
    const int64_t row = first + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < length)
      v = *reinterpret_cast<const uint4 *>(x + ((b * length + row) * heads + h) * D + c * 8);
    *reinterpret_cast<uint4 *>(tile + r * pitch + c * 8) = v;
  }
}

/// The same rows transposed: tile[d][r], pitch rows + kPad.
template <int D>
__device__ inline void loadRowsTransposed(const uint16_t *x, int64_t b, int64_t length,
                                          int64_t heads, int64_t h, int64_t first, int rows,
                                          uint16_t *tile) {
  constexpr int chunks = D / 8;
  const int pitch = rows + kPad;
  for (int e = threadIdx.x; e < rows * chunks; e += blockDim.x) {
    const int r = e % rows, c = e / rows;
    const int64_t row = first + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < length)
      v = *reinterpret_cast<const uint4 *>(x + ((b * length + row) * heads + h) * D + c * 8);
    const auto *parts = reinterpret_cast<const uint16_t *>(&v);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      tile[(c * 8 + i) * pitch + r] = parts[i];
  }
}

/// Two neighbouring elements of shared memory as one register.
__device__ inline uint32_t pair(const uint16_t *p) { return *reinterpret_cast<const uint32_t *>(p); }

/// The row-major fragment of rows [r0, r0 + 16) and columns [k0, k0 + 16) of a tile.
__device__ inline void loadA(const uint16_t *tile, int pitch, int r0, int k0, uint32_t (&a)[4]) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  a[0] = pair(tile + (r0 + g) * pitch + k0 + 2 * t);
  a[1] = pair(tile + (r0 + g + 8) * pitch + k0 + 2 * t);
  a[2] = pair(tile + (r0 + g) * pitch + k0 + 8 + 2 * t);
  a[3] = pair(tile + (r0 + g + 8) * pitch + k0 + 8 + 2 * t);
}

/// b[k][n] = tile[n0 + n][k0 + k]: the column-major fragment of a tile's rows as columns.
__device__ inline void loadB(const uint16_t *tile, int pitch, int n0, int k0, uint32_t &b0,
                             uint32_t &b1) {
  const int lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  b0 = pair(tile + (n0 + g) * pitch + k0 + 2 * t);
  b1 = pair(tile + (n0 + g) * pitch + k0 + 8 + 2 * t);
}

/// Columns [16 kk, 16 kk + 16) of a warp's 16-row accumulators (8 columns each) as a row-major
/// fragment of the operand type: the scores become the next product's left operand.
template <class T, int N>
__device__ inline void accumulatorsAsA(const float (&s)[N][4], int kk, uint32_t (&a)[4]) {
  a[0] = Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]);
  a[1] = Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]);
  a[2] = Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
  a[3] = Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
}

/// acc[n] += (rows [r0, r0 + 16) of tile a) · (rows [8n, 8n + 8) of tile b)ᵀ over their first
/// K columns: a warp's 16 × 8N product of two row-major tiles.
template <class T, int N, int K>
__device__ inline void rowsTimesRows(float (&acc)[N][4], const uint16_t *a, int pitchA, int r0,
                                     const uint16_t *b, int pitchB) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t fa[4];
    loadA(a, pitchA, r0, kk * 16, fa);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      uint32_t b0, b1;
      loadB(b, pitchB, n * 8, kk * 16, b0, b1);
      Mma<T>::run(acc[n], fa, b0, b1);
    }
  }
}

/// acc[m] += s · (rows [8m, 8m + 8) of tile b)ᵀ: a warp's 16 × 8N accumulators, rounded to
/// the operand type, as the left operand against a transposed tile (b[column][row]).
template <class T, int N, int M>
__device__ inline void scoresTimesTile(float (&acc)[M][4], const float (&s)[N][4],
                                       const uint16_t *b, int pitchB) {
#pragma unroll
  for (int kk = 0; kk < N / 2; ++kk) {
    uint32_t fa[4];
    accumulatorsAsA<T>(s, kk, fa);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      uint32_t b0, b1;
      loadB(b, pitchB, m * 8, kk * 16, b0, b1);
      Mma<T>::run(acc[m], fa, b0, b1);
    }
  }
}

/// Writes a warp's 16 rows of accumulators (D / 8 tiles), times `scale`, to rows row0 and
/// row0 + 8 (those before `length`) of head h of batch b of a [batch, length, heads, D] tensor.
template <class T, int D>
__device__ inline void storeRows(const float (&acc)[D / 8][4], float scale0, float scale1,
                                 uint16_t *x, int64_t b, int64_t length, int64_t heads,
                                 int64_t h, int64_t row0) {
  const int t = (threadIdx.x % 32) & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row0 + 8 * r;
    if (row >= length)
      continue;
    const float s = r == 0 ? scale0 : scale1;
    uint16_t *base = x + ((b * length + row) * heads + h) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t *>(base + dt * 8) =
          Mma<T>::pack(acc[dt][2 * r] * s, acc[dt][2 * r + 1] * s);
  }
}

} // namespace tessel::cuda::flash

#endif // TESSEL_KERNELS_CUDA_FLASHATTENTIONTILES_CUH
