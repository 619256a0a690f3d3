//===- Combine.cu - The reduction of the collectives between GPU ranks ----===//
//
// y[i] = y[i] (op) x[i]: how a LocalCommunicator whose ranks share a GPU combines one member's
// buffer into a sum or maximum, the members in group-index order, exactly as the host's
// reduceInto (runtime/comm/Communicator.h) does: one f32 addition per element (no fused
// multiply-add, no reassociation), and a maximum that keeps a NaN. So ranks as threads on a GPU
// give the bits of ranks as threads on the CPU.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

using namespace detail;

__global__ void combineKernel(bool max, int64_t n, float *y, const float *x) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float a = y[i], b = x[i];
    // As reduceInto: y = (y is NaN or x > y) ? x : y, so a NaN in either stays.
    y[i] = max ? (a != a || b > a ? b : a) : __fadd_rn(a, b);
  }
}

} // namespace

cudaError_t combine(bool max, int64_t n, float *y, const float *x, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  combineKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(max, n, y, x);
  return detail::launched();
}

} // namespace tessel::cuda
