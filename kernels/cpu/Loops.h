//===- Loops.h - Loop helpers shared by the CPU kernels ---------*- C++ -*-===//
//
// Private to kernels/cpu: the strided-loop walker that binary, stridedCopy and reduceSum share,
// and the sizes below which a kernel stays on one thread.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_LOOPS_H
#define TESSEL_KERNELS_CPU_LOOPS_H

#include "kernels/cpu/Isa.h"

#include "kernels/cpu/CpuKernels.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessel::cpu::detail {
inline namespace TESSEL_CPU_ISA {

/// Elementwise work below this many elements runs on one thread: a parallel region costs a
/// few microseconds, which is more than the work itself.
constexpr int64_t kParallelGrain = 1 << 15;

/// Calls body(tensor, begin, end) for chunks of at most kParallelGrain elements of each of
/// `count` tensors (each with its element count `n`), covering every element once, the chunks
/// of all tensors split over threads in one parallel region. Only for work whose elements are
/// updated independently: the bits do not depend on the split.
template <class Tensor, class Body>
void forEachChunk(const Tensor *tensors, size_t count, Body body) {
  struct Chunk {
    size_t tensor;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < count; ++t)
    for (int64_t begin = 0; begin < tensors[t].n; begin += kParallelGrain)
      chunks.push_back({t, begin, std::min(tensors[t].n, begin + kParallelGrain)});
  const int64_t total = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(static) if (total > 1)
  for (int64_t c = 0; c < total; ++c)
    body(tensors[chunks[c].tensor], chunks[c].begin, chunks[c].end);
}

/// A shape with the strides of N operands, size-1 dims dropped and adjacent dims merged wherever
/// every operand steps through them as one (stride[d] == stride[d+1] * size[d+1]). The walk
/// order over elements is unchanged; there is always at least one dim.
template <int N> struct Collapsed {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[N][kMaxRank] = {};

  int64_t numElements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= size[d];
    return n;
  }
};

template <int N> Collapsed<N> collapse(const Shape &shape, const Strides *const (&ops)[N]) {
  Collapsed<N> c;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.size[d] == 1)
      continue;
    if (c.rank > 0) {
      int last = c.rank - 1;
      bool merge = true;
      for (int o = 0; o < N; ++o)
        merge &= c.stride[o][last] == ops[o]->stride[d] * shape.size[d];
      if (merge) {
        c.size[last] *= shape.size[d];
        for (int o = 0; o < N; ++o)
          c.stride[o][last] = ops[o]->stride[d];
        continue;
      }
    }
    c.size[c.rank] = shape.size[d];
    for (int o = 0; o < N; ++o)
      c.stride[o][c.rank] = ops[o]->stride[d];
    ++c.rank;
  }
  if (c.rank == 0) {
    c.rank = 1;
    c.size[0] = 1;
  }
  return c;
}

/// Calls body(linear, offsets, length) for runs of consecutive elements along the innermost dim,
/// covering every element of `c` once: `linear` is the dense (row-major) index of the run's
/// first element, offsets[o] its offset in operand o. Runs are split in fixed chunks over
/// threads; only use it where every element is written independently.
template <int N, class Body> void forEachRun(const Collapsed<N> &c, Body body) {
  const int64_t total = c.numElements();
  const int inner = c.rank - 1;
  const int64_t innerSize = c.size[inner];
  const int64_t chunks = (total + kParallelGrain - 1) / kParallelGrain;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = chunk * kParallelGrain;
    const int64_t end = std::min(total, begin + kParallelGrain);
    int64_t index[kMaxRank] = {};
    int64_t offset[N] = {};
    int64_t rest = begin / innerSize;
    int64_t j = begin % innerSize;
    for (int d = inner - 1; d >= 0; --d) {
      index[d] = rest % c.size[d];
      rest /= c.size[d];
      for (int o = 0; o < N; ++o)
        offset[o] += index[d] * c.stride[o][d];
    }
    for (int64_t linear = begin; linear < end;) {
      const int64_t length = std::min(innerSize - j, end - linear);
      int64_t at[N];
      for (int o = 0; o < N; ++o)
        at[o] = offset[o] + j * c.stride[o][inner];
      body(linear, at, length);
      linear += length;
      j = 0;
      for (int d = inner - 1; d >= 0; --d) {
        for (int o = 0; o < N; ++o)
          offset[o] += c.stride[o][d];
        if (++index[d] < c.size[d])
          break;
        for (int o = 0; o < N; ++o)
          offset[o] -= c.size[d] * c.stride[o][d];
        index[d] = 0;
      }
    }
  }
}

} // namespace TESSEL_CPU_ISA
} // namespace tessel::cpu::detail

#endif // TESSEL_KERNELS_CPU_LOOPS_H
