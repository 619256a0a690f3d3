//===- GradNorm.cu - Gradient norm, finiteness check, clipping ------------===//
//
// The CPU counterparts are the handlers of global_norm, sum_squares, guard_finite and
// clip_coefficient (runtime/device/cpu/CpuKernelCalls.cpp), which sum in f64 in index order.
// Here each input is summed in f64 by a fixed grid (kSquareBlocks blocks, each a fixed tree),
// then one thread adds the blocks' sums input after input: the same result on every run, equal
// to the CPU's up to the f64 rounding of a different order.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

/// Blocks per input of the sum of squares, and their threads (a power of two).
constexpr int kSquareBlocks = 128;
constexpr int kSquareThreads = 256;

/// partial[blockIdx.x] = the block's share of the sum of x^2, in f64.
__global__ void squaresKernel(int64_t n, const float *x, double *partial) {
  __shared__ double sums[kSquareThreads];
  double sum = 0.0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    sum += static_cast<double>(x[i]) * x[i];
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kSquareThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sums[0];
}

__global__ void totalKernel(int64_t count, const double *partial, bool root, float *out) {
  double total = 0.0;
  for (int64_t k = 0; k < count; ++k) {
    double input = 0.0;
    for (int b = 0; b < kSquareBlocks; ++b)
      input += partial[k * kSquareBlocks + b];
    total += input;
  }
  out[0] = static_cast<float>(root ? sqrt(total) : total);
}

__global__ void nonFiniteKernel(int64_t n, const float *x, int *flag) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    if (!isfinite(x[i])) {
      *flag = 1;
      return;
    }
}

__global__ void clipKernel(const float *norm, float max, float *c) {
  // As torch.nn.utils.clip_grad_norm_: max / (norm + 1e-6), clamped at 1, in f32.
  c[0] = fminf(max / (norm[0] + 1e-6f), 1.0f);
}

} // namespace

int64_t sumOfSquaresWorkspace(int64_t inputs) { return inputs * kSquareBlocks; }

cudaError_t sumOfSquares(int64_t count, const float *const *inputs, const int64_t *sizes, bool root,
                         float *out, double *workspace, cudaStream_t stream) {
  if (count < 0 || (count > 0 && !workspace))
    return cudaErrorInvalidValue;
  for (int64_t k = 0; k < count; ++k) {
    if (sizes[k] < 0)
      return cudaErrorInvalidValue;
    squaresKernel<<<kSquareBlocks, kSquareThreads, 0, stream>>>(sizes[k], inputs[k],
                                                                workspace + k * kSquareBlocks);
    if (cudaError_t e = detail::launched(); e != cudaSuccess)
      return e;
  }
  totalKernel<<<1, 1, 0, stream>>>(count, workspace, root, out);
  return detail::launched();
}

cudaError_t findNonFinite(int64_t n, const float *x, int *flag, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  nonFiniteKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(n, x, flag);
  return detail::launched();
}

cudaError_t clipCoefficient(const float *norm, float max, float *c, cudaStream_t stream) {
  clipKernel<<<1, 1, 0, stream>>>(norm, max, c);
  return detail::launched();
}

} // namespace tessel::cuda
