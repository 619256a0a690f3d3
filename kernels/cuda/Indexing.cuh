//===- Indexing.cuh - Strided operands of the elementwise kernels -*- CUDA -*-===//
//
// Private to kernels/cuda: the shape and operand strides of an elementwise call (Indexing),
// merged on the host into as few dims as give the same offsets, and what the kernels of
// Elementwise.cu take by value to find an operand's element from the output's linear index.
//
// A dim's index is a quotient and remainder of that linear index, computed once for every
// operand (Offsets). Where a launch's indices and offsets all fit in 32 bits the division is a
// multiply-high, an add and a shift by numbers fixed on the host (Divider32): a 64-bit
// division, and even a 32-bit one, costs a GPU tens of instructions, more than a memory-bound
// kernel has per element. Either division is exact, so the offsets are the same.
//
// Where every operand walks the innermost dim in order or repeats one value along it (Rows),
// a thread takes groups of eight consecutive outputs of a row and finds the row's starts once
// per group.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_INDEXING_CUH
#define TESSEL_KERNELS_CUDA_INDEXING_CUH

#include "kernels/cuda/Common.cuh"
#include "kernels/cuda/RowGroups.cuh"

#include <type_traits>

namespace tessel::cuda::detail {

/// The shape of an output and the strides of up to N operands, as merged on the host.
template <int N> struct Indexing {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[N][kMaxRank] = {};
};

/// Division of a dividend below 2^31 by a divisor fixed on the host (Granlund and Montgomery):
/// with 2^shift the least power of two not below the divisor and magic = floor(2^32 (2^shift -
/// divisor) / divisor) + 1, n / divisor = (umulhi(n, magic) + n) >> shift exactly for every
/// n below 2^32; a dividend below 2^31 keeps the sum in 32 bits.
struct Divider32 {
  uint32_t divisor = 1, magic = 1, shift = 0;
  Divider32() = default;
  explicit Divider32(uint32_t d) : divisor(d) {
    while ((uint64_t(1) << shift) < d)
      ++shift;
    magic = static_cast<uint32_t>((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d) / d + 1);
  }
  __device__ uint32_t div(uint32_t n) const { return (__umulhi(n, magic) + n) >> shift; }
};
/// The same as a plain 64-bit division, for launches whose indices may pass 2^31.
struct Divider64 {
  int64_t divisor = 1;
  Divider64() = default;
  explicit Divider64(int64_t d) : divisor(d) {}
  __device__ int64_t div(int64_t n) const { return n / divisor; }
};
/// The divider of index type I: uint32_t (see fitsIn32) or int64_t.
template <class I>
using DividerOf = std::conditional_t<std::is_same_v<I, uint32_t>, Divider32, Divider64>;

/// Dims (innermost last) and N operands' strides as a kernel takes them, in index type I.
template <class I, int N> struct Offsets {
  int rank = 0;
  DividerOf<I> size[kMaxRank];
  I stride[N][kMaxRank] = {};
};

/// Every operand's offset of element `linear` (row-major over the dims): each dim's index is
/// found once for all operands, and the outermost dim takes what is left of `linear` without a
/// division. The loop runs over every possible dim so that each dim's numbers are read from
/// the kernel's parameters at a fixed place.
template <class I, int N>
__device__ inline void offsetsOf(const Offsets<I, N> &ix, I linear, I (&offset)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k)
    offset[k] = 0;
  if (ix.rank == 0)
    return;
#pragma unroll
  for (int d = kMaxRank - 1; d > 0; --d) {
    if (d >= ix.rank)
      continue;
    const I quotient = ix.size[d].div(linear);
    const I i = linear - quotient * static_cast<I>(ix.size[d].divisor);
    linear = quotient;
#pragma unroll
    for (int k = 0; k < N; ++k)
      offset[k] += i * ix.stride[k][d];
  }
#pragma unroll
  for (int k = 0; k < N; ++k)
    offset[k] += linear * ix.stride[k][0];
}

/// The outer `rank` dims of ix (all of them, or all but the innermost) as a kernel takes them.
template <class I, int N> Offsets<I, N> offsetsFor(const Indexing<N> &ix, int rank) {
  Offsets<I, N> o;
  o.rank = rank;
  for (int d = 0; d < rank; ++d) {
    o.size[d] = DividerOf<I>(static_cast<I>(ix.size[d]));
    for (int k = 0; k < N; ++k)
      o.stride[k][d] = static_cast<I>(ix.stride[k][d]);
  }
  return o;
}

/// Whether n elements' indices and every operand's offsets (strides non-negative) stay below
/// 2^31, so that the offsets may be computed in 32 bits.
template <int N> bool fitsIn32(const Indexing<N> &ix, int64_t n) {
  constexpr int64_t kLimit = int64_t(1) << 31;
  if (n >= kLimit)
    return false;
  for (int k = 0; k < N; ++k) {
    int64_t last = 0;
    for (int d = 0; d < ix.rank; ++d) {
      if (ix.stride[k][d] < 0)
        return false;
      last += (ix.size[d] - 1) * ix.stride[k][d];
    }
    if (last >= kLimit)
      return false;
  }
  return true;
}

/// Whether every operand is dense in the output's order: one merged dim of stride 1 (or none).
template <int N> bool isDense(const Indexing<N> &ix) {
  if (ix.rank > 1)
    return false;
  for (int k = 0; k < N; ++k)
    if (ix.rank == 1 && ix.stride[k][0] != 1)
      return false;
  return true;
}

/// An output seen as rows of its innermost dim (`cols` elements), each cut into groups of
/// kGroup, where every operand reads a row either in order (inner stride 1) or as one value
/// repeated (inner stride 0): a group's elements are then consecutive in every operand that
/// reads in order, and a group needs one division to find its row and one row's offsets.
template <class I, int N> struct Rows {
  Offsets<I, N> starts; ///< a row's index to each operand's offset of its first element
  DividerOf<I> groupsPerRow;
  I cols = 0;
  bool repeats[N] = {}; ///< inner stride 0: the row's one value for every column
};

/// Whether ix (not dense) runs as Rows: every operand's innermost stride is 0 or 1.
template <int N> bool hasRows(const Indexing<N> &ix) {
  if (ix.rank == 0)
    return false;
  for (int k = 0; k < N; ++k)
    if (ix.stride[k][ix.rank - 1] != 0 && ix.stride[k][ix.rank - 1] != 1)
      return false;
  return true;
}

template <class I, int N> Rows<I, N> rowsFor(const Indexing<N> &ix) {
  Rows<I, N> r;
  r.starts = offsetsFor<I>(ix, ix.rank - 1);
  r.cols = static_cast<I>(ix.size[ix.rank - 1]);
  r.groupsPerRow = DividerOf<I>(static_cast<I>(groupsOf(r.cols)));
  for (int k = 0; k < N; ++k)
    r.repeats[k] = ix.stride[k][ix.rank - 1] == 0;
  return r;
}

/// Groups of a Rows call over n elements.
template <class I, int N> I groupsOf(const Rows<I, N> &r, int64_t n) {
  return static_cast<I>(n / r.cols * r.groupsPerRow.divisor);
}

/// Whether every group of eight that Rows reads or writes whole starts on a 16-byte boundary:
/// the base of each operand that reads in order and each of its row starts (bytes[k] per
/// element), and the output's (outBytes per element, its rows dense).
template <int N, class Out, class... In>
bool rowsAligned(const Indexing<N> &ix, const Out &out, const In &...in) {
  const void *data[N] = {in.data...};
  const int64_t bytes[N] = {elementBytes(in.type)...};
  const int64_t cols = ix.size[ix.rank - 1];
  if (reinterpret_cast<uintptr_t>(out.data) % 16 != 0 || cols * elementBytes(out.type) % 16 != 0)
    return false;
  for (int k = 0; k < N; ++k) {
    if (ix.stride[k][ix.rank - 1] == 0)
      continue;
    if (reinterpret_cast<uintptr_t>(data[k]) % 16 != 0)
      return false;
    for (int d = 0; d + 1 < ix.rank; ++d)
      if (ix.stride[k][d] * bytes[k] % 16 != 0)
        return false;
  }
  return true;
}

/// The shape and strides with dims of size 1 dropped and neighbouring dims merged where every
/// operand walks them as one (its stride of the outer dim is the inner dim's extent): the same
/// offsets with fewer divisions per element (a dense operand's offsets need none).
template <int N>
bool makeIndexing(const Shape &shape, const Strides *const (&strides)[N], Indexing<N> &ix) {
  if (shape.rank < 0 || shape.rank > kMaxRank)
    return false;
  int rank = 0;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.size[d] <= 0)
      return false;
    if (shape.size[d] == 1)
      continue;
    bool merges = rank > 0;
    for (int k = 0; k < N && merges; ++k)
      merges = ix.stride[k][rank - 1] == strides[k]->stride[d] * shape.size[d];
    if (merges) {
      ix.size[rank - 1] *= shape.size[d];
      for (int k = 0; k < N; ++k)
        ix.stride[k][rank - 1] = strides[k]->stride[d];
      continue;
    }
    ix.size[rank] = shape.size[d];
    for (int k = 0; k < N; ++k)
      ix.stride[k][rank] = strides[k]->stride[d];
    ++rank;
  }
  ix.rank = rank;
  return true;
}

} // namespace tessel::cuda::detail

#endif // TESSEL_KERNELS_CUDA_INDEXING_CUH
