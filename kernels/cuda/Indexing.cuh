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

/// Operand k's offset of output element `linear` (row-major over the shape).
template <int N> __device__ inline int64_t offsetOf(const Indexing<N> &ix, int k, int64_t linear) {
  int64_t offset = 0;
  for (int d = ix.rank - 1; d >= 0; --d) {
    const int64_t i = linear % ix.size[d];
    linear /= ix.size[d];
    offset += i * ix.stride[k][d];
  }
  return offset;
}

template <int N>
bool makeIndexing(const Shape &shape, const Strides *const (&strides)[N], Indexing<N> &ix) {
  if (shape.rank < 0 || shape.rank > kMaxRank)
    return false;
  ix.rank = shape.rank;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.size[d] <= 0)
      return false;
    ix.size[d] = shape.size[d];
    for (int k = 0; k < N; ++k)
      ix.stride[k][d] = strides[k]->stride[d];
  }
  return true;
}

} // namespace tessel::cuda::detail

#endif // TESSEL_KERNELS_CUDA_INDEXING_CUH
