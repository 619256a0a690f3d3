//===- Indexing.cuh - Strided operands of the elementwise kernels -*- CUDA -*-===//
//
// Private to kernels/cuda: the shape and operand strides the elementwise kernels
// (Elementwise.cu) take by value, and the offset of an operand's element.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_INDEXING_CUH
#define TESSEL_KERNELS_CUDA_INDEXING_CUH

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda::detail {

/// The shape of an output and the strides of up to N operands, by value into a kernel.
template <int N> struct Indexing {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[N][kMaxRank] = {};
};

/// Operand k's offset of output element `linear` (row-major over the shape). The outermost
/// dim takes what is left of `linear` without a division. I is the index arithmetic's type:
/// uint32_t where fitsIn32 says every index and offset fits (a 64-bit division costs several
/// times a 32-bit one), else int64_t; the offsets are the same.
template <class I, int N> __device__ inline I offsetOf(const Indexing<N> &ix, int k, I linear) {
  I offset = 0;
  for (int d = ix.rank - 1; d > 0; --d) {
    const I size = static_cast<I>(ix.size[d]);
    const I i = linear % size;
    linear /= size;
    offset += i * static_cast<I>(ix.stride[k][d]);
  }
  return ix.rank > 0 ? offset + linear * static_cast<I>(ix.stride[k][0]) : 0;
}

/// Whether n elements' indices and every operand's offsets (strides non-negative) stay below
/// 2^31, so that offsetOf may compute in 32 bits.
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
