//===- GradNorm.cu - Gradient norm, finiteness check, clipping ------------===//
//
// The CPU counterparts are the handlers of global_norm, sum_squares, guard_finite and
// clip_coefficient (runtime/device/cpu/CpuKernelCalls.cpp), which sum in f64 in index order.
// Here the inputs are cut into the optimizers' chunks (MultiTensor.cuh), a few launches for a
// whole model rather than one per tensor: each block sums the squares of its chunk in f64 in
// a fixed tree, then one block adds the chunks' sums in a fixed tree. The same result on every
// run, equal to the CPU's up to the f64 rounding of a different order.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/MultiTensor.cuh"

namespace tessel::cuda {

namespace {

using detail::kChunkElements;

/// Threads of the chunk sums and of the total (a power of two).
constexpr int kSquareThreads = 256;

using SquaresTable = detail::MultiTensorTable<1>;

/// The sum over the block of every thread's `v` in f64, to thread 0, in a fixed tree.
__device__ inline double blockSumF64(double v, double *sums) {
  sums[threadIdx.x] = v;
  __syncthreads();
  for (int half = kSquareThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  return sums[0];
}

/// partial[first + blockIdx.x] = the sum of x^2 over the block's chunk, in f64.
__global__ void chunkSquaresKernel(SquaresTable table, int64_t first, double *partial) {
  __shared__ double sums[kSquareThreads];
  int64_t begin, end;
  const int t = detail::blockRange(table, begin, end);
  const float *x = static_cast<const float *>(table.ptr[0][t]);
  double sum = 0.0;
  // Four at a time where the chunk starts 16-byte aligned (chunks are a multiple of four
  // long), the rest one at a time; each thread's order is fixed by the chunk alone.
  int64_t i = begin;
  if (reinterpret_cast<uintptr_t>(x + begin) % 16 == 0) {
    const int64_t quads = (end - begin) / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(x + begin);
    for (int64_t q = threadIdx.x; q < quads; q += blockDim.x) {
      const float4 v = x4[q];
      sum += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y +
             static_cast<double>(v.z) * v.z + static_cast<double>(v.w) * v.w;
    }
    i = begin + quads * 4;
  }
  for (int64_t k = i + threadIdx.x; k < end; k += blockDim.x)
    sum += static_cast<double>(x[k]) * x[k];
  const double total = blockSumF64(sum, sums);
  if (threadIdx.x == 0)
    partial[first + blockIdx.x] = total;
}

__global__ void totalKernel(int64_t chunks, const double *partial, bool root, float *out) {
  __shared__ double sums[kSquareThreads];
  double sum = 0.0;
  for (int64_t k = threadIdx.x; k < chunks; k += blockDim.x)
    sum += partial[k];
  const double total = blockSumF64(sum, sums);
  if (threadIdx.x == 0)
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

int64_t sumOfSquaresWorkspace(int64_t count, const int64_t *sizes) {
  int64_t chunks = 0;
  for (int64_t k = 0; k < count; ++k)
    chunks += (std::max<int64_t>(sizes[k], 0) + kChunkElements - 1) / kChunkElements;
  return std::max<int64_t>(chunks, 1);
}

cudaError_t sumOfSquares(int64_t count, const float *const *inputs, const int64_t *sizes, bool root,
                         float *out, double *workspace, cudaStream_t stream) {
  if (count < 0 || !workspace)
    return cudaErrorInvalidValue;
  for (int64_t k = 0; k < count; ++k)
    if (sizes[k] < 0 || (sizes[k] > 0 && !inputs[k]))
      return cudaErrorInvalidValue;
  int64_t chunks = 0;
  const cudaError_t e = detail::forEachTable<1>(
      static_cast<size_t>(count), [&](size_t k) { return sizes[k]; },
      [&](size_t k, void **ptrs) { ptrs[0] = const_cast<float *>(inputs[k]); },
      [&](const SquaresTable &table, int blocks) {
        chunkSquaresKernel<<<blocks, kSquareThreads, 0, stream>>>(table, chunks, workspace);
        chunks += blocks;
        return detail::launched();
      });
  if (e != cudaSuccess)
    return e;
  totalKernel<<<1, kSquareThreads, 0, stream>>>(chunks, workspace, root, out);
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
