//===- TopK.cu - The mask of each row's k largest entries -----------------===//
//
// One thread per row: the rows a mixture of experts routes are one entry per expert, too short
// to share. Each of the k picks scans the row for the largest entry not yet chosen, so ties go
// to the lower column as in kernels/cpu/TopK.cpp, the reference.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

/// Whether `a` ranks before `b`: larger, with NaN above every number.
__device__ bool ranksBefore(float a, float b) {
  if (isnan(a))
    return !isnan(b);
  return !isnan(b) && a > b;
}

template <class T>
__global__ void topKMaskKernel(int64_t rows, int64_t cols, int64_t k, const T *x, T *y) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T *xr = x + r * cols;
    T *yr = y + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      detail::store(yr + j, 0.0f);
    for (int64_t pick = 0; pick < k; ++pick) {
      int64_t best = -1;
      for (int64_t j = 0; j < cols; ++j)
        if (detail::load(yr + j) == 0.0f &&
            (best < 0 || ranksBefore(detail::load(xr + j), detail::load(xr + best))))
          best = j;
      detail::store(yr + best, 1.0f);
    }
  }
}

} // namespace

cudaError_t topKMask(int64_t rows, int64_t cols, int64_t k, const float *x, float *y,
                     cudaStream_t stream) {
  if (!detail::validRows(rows, cols) || k < 1 || k > cols)
    return cudaErrorInvalidValue;
  topKMaskKernel<<<detail::mapBlocks(rows), detail::kMapThreads, 0, stream>>>(rows, cols, k, x,
                                                                                y);
  return detail::launched();
}

} // namespace tessel::cuda
