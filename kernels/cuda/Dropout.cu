//===- Dropout.cu - Counter-based dropout ---------------------------------===//
//
// The CPU counterpart is cpu::dropoutBlock (kernels/cpu/Dropout.cpp). The mask of an element
// is a pure function of (seed, its index in the whole tensor): the same splitmix64 output,
// whose top 24 bits make an exact f32 in [0, 1), so both backends drop the same elements and
// scale the kept ones by the same factor.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

/// The block's place in the whole tensor, by value into the kernel.
struct Block {
  int rank = 0;
  int64_t size[kMaxRank] = {}, offset[kMaxRank] = {}, tail[kMaxRank] = {}, whole[kMaxRank] = {};
};

/// As kernels/cpu/Dropout.cpp's splitmix64.
__device__ inline uint64_t splitmix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void dropoutKernel(int64_t n, Block block, float rate, float keepScale, uint64_t seed,
                              const float *x, float *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, whole = 0, stride = 1;
    for (int d = block.rank - 1; d >= 0; --d) {
      // Under a head-tail split the block's second half is the tail chunk.
      const int64_t i = rest % block.size[d], half = block.size[d] / 2;
      whole += (block.tail[d] >= 0 && i >= half ? block.tail[d] + i - half : block.offset[d] + i) *
               stride;
      rest /= block.size[d];
      stride *= block.whole[d];
    }
    const float u = static_cast<float>(splitmix64(seed, static_cast<uint64_t>(whole)) >> 40) *
                    (1.0f / 16777216.0f);
    y[i] = rate <= 0.0f ? x[i] : x[i] * (u >= rate ? keepScale : 0.0f);
  }
}

} // namespace

cudaError_t dropoutBlock(const std::vector<int64_t> &shape, const std::vector<int64_t> &offset,
                         const std::vector<int64_t> &tail, const std::vector<int64_t> &wholeShape,
                         float rate, uint64_t seed, const float *x, float *y, cudaStream_t stream) {
  if (shape.size() > static_cast<size_t>(kMaxRank) || offset.size() != shape.size() ||
      wholeShape.size() != shape.size() || tail.size() != shape.size() ||
      !(rate >= 0.0f && rate < 1.0f))
    return cudaErrorInvalidValue;
  Block block;
  block.rank = static_cast<int>(shape.size());
  int64_t n = 1;
  for (int d = 0; d < block.rank; ++d) {
    if (shape[d] <= 0)
      return cudaErrorInvalidValue;
    block.size[d] = shape[d];
    block.offset[d] = offset[d];
    block.tail[d] = tail[d];
    block.whole[d] = wholeShape[d];
    n *= shape[d];
  }
  const float keepScale = rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
  dropoutKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(n, block, rate, keepScale,
                                                                          seed, x, y);
  return detail::launched();
}

} // namespace tessel::cuda
