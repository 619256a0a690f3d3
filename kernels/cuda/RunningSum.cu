//===- RunningSum.cu - Sums over each sequence's earlier tokens -----------===//
//
// As kernels/cpu/RunningSum.cpp: one thread per sequence and value, walking the call's tokens
// in order, so each sum adds its terms in the CPU's order.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

using detail::kMapThreads;
using detail::mapBlocks;

__global__ void runningSumKernel(RunningSumArgs a, const float *x, const int32_t *positions,
                                 const int32_t *blockTable, float *y, float *totals) {
  const int64_t total = a.batch * a.width;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / a.width, j = e % a.width;
    const int32_t *pos = positions + b * a.seq;
    const int32_t block = blockTable[b * a.maxBlocks];
    const bool held = block >= 0 && block < a.blocks;
    float sum = 0.0f;
    if (held) {
      int64_t first = 0;
      while (first < a.seq && pos[first] < 0)
        ++first;
      sum = first < a.seq && pos[first] == 0 ? 0.0f : totals[block * a.width + j];
    }
    for (int64_t s = 0; s < a.seq; ++s) {
      const int64_t at = (b * a.seq + s) * a.width + j;
      if (!held || pos[s] < 0) {
        y[at] = -1.0f;
        continue;
      }
      if (a.inclusive)
        sum += x[at];
      y[at] = sum;
      if (!a.inclusive)
        sum += x[at];
    }
    if (held)
      totals[block * a.width + j] = sum;
  }
}

} // namespace

cudaError_t runningSum(const RunningSumArgs &args, const float *x, const int32_t *positions,
                       const int32_t *blockTable, float *y, float *totals, cudaStream_t stream) {
  runningSumKernel<<<mapBlocks(args.batch * args.width), kMapThreads, 0, stream>>>(
      args, x, positions, blockTable, y, totals);
  return cudaGetLastError();
}

} // namespace tessel::cuda
