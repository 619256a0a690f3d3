//===- MultiTensor.cuh - One launch over many tensors -----------*- CUDA -*-===//
//
// Private to kernels/cuda: how the optimizers update every tensor of a model in a few
// launches, not one per tensor. A launch's table of tensors travels as the kernel's argument
// (no device memory to allocate or copy first, so a launch can be captured in a graph): for each
// tensor its pointers, one per role (param, grad, ...), and its element count; for each block
// the tensor and the chunk of it that the block updates. A tensor too large for one launch
// continues in the next.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_MULTITENSOR_CUH
#define TESSEL_KERNELS_CUDA_MULTITENSOR_CUH

#include "kernels/cuda/Common.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace tessel::cuda::detail {

/// Elements one block updates: a chunk of one tensor.
constexpr int64_t kChunkElements = 1 << 16;
/// Tensors and blocks of one launch, sized so that a table of five roles stays under the 4 KiB
/// that a kernel's arguments may take on every architecture.
constexpr int kTableTensors = 36;
constexpr int kTableBlocks = 320;

template <int Roles> struct MultiTensorTable {
  void *ptr[Roles][kTableTensors];
  int64_t n[kTableTensors];
  uint8_t blockTensor[kTableBlocks];
  int32_t blockChunk[kTableBlocks];
};
static_assert(sizeof(MultiTensorTable<5>) < 4096 - 256, "a table must fit a kernel's arguments");

/// The range [begin, end) of its tensor that this block updates, and the tensor's slot.
template <int Roles>
__device__ inline int blockRange(const MultiTensorTable<Roles> &table, int64_t &begin,
                                 int64_t &end) {
  const int t = table.blockTensor[blockIdx.x];
  begin = static_cast<int64_t>(table.blockChunk[blockIdx.x]) * kChunkElements;
  end = begin + kChunkElements < table.n[t] ? begin + kChunkElements : table.n[t];
  return t;
}

/// Fills tables from `count` tensors, tensor t having elements n(t) and the pointers that
/// roles(t, ptrs) writes to ptrs[0, Roles), and calls launch(table, blocks) for each full table
/// and the last one. Returns the first error a launch returns.
template <int Roles, class Elements, class Pointers, class Launch>
cudaError_t forEachTable(size_t count, Elements n, Pointers roles, Launch launch) {
  MultiTensorTable<Roles> table;
  int tensors = 0, blocks = 0;
  auto place = [&](size_t t) {
    table.n[tensors] = n(t);
    void *ptrs[Roles];
    roles(t, ptrs);
    for (int r = 0; r < Roles; ++r)
      table.ptr[r][tensors] = ptrs[r];
    ++tensors;
  };
  for (size_t t = 0; t < count; ++t) {
    const int64_t elements = n(t);
    if (elements == 0)
      continue;
    place(t);
    const int64_t chunks = (elements + kChunkElements - 1) / kChunkElements;
    for (int64_t c = 0; c < chunks; ++c) {
      table.blockTensor[blocks] = static_cast<uint8_t>(tensors - 1);
      table.blockChunk[blocks] = static_cast<int32_t>(c);
      if (++blocks < kTableBlocks)
        continue;
      if (cudaError_t e = launch(table, blocks); e != cudaSuccess)
        return e;
      blocks = tensors = 0;
      if (c + 1 < chunks)
        place(t); // The rest of this tensor, in the next table.
    }
    if (tensors == kTableTensors) {
      if (cudaError_t e = launch(table, blocks); e != cudaSuccess)
        return e;
      blocks = tensors = 0;
    }
  }
  return blocks ? launch(table, blocks) : cudaSuccess;
}

} // namespace tessel::cuda::detail

#endif // TESSEL_KERNELS_CUDA_MULTITENSOR_CUH
