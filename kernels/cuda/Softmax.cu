//===- Softmax.cu - Softmax over the last dim and its gradient ------------===//
//
// One block per row: the row's max, then the sum of exp(x - max), then the scaled values
// (kernels/cpu/Norm.cpp is the reference).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

using detail::kRowThreads;

template <class T> __global__ void softmaxKernel(int64_t cols, const T *x, T *y) {
  __shared__ float scratch[32];
  const T *xr = x + blockIdx.x * cols;
  T *yr = y + blockIdx.x * cols;
  const float2 s = detail::rowMaxAndSumExp(cols, xr, scratch);
  const float max = s.x, inv = 1.0f / s.y;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(yr + j, expf(detail::load(xr + j) - max) * inv);
}

template <class T> __global__ void softmaxGradKernel(int64_t cols, const T *y, const T *dy, T *dx) {
  __shared__ float scratch[32];
  const T *yr = y + blockIdx.x * cols, *dyr = dy + blockIdx.x * cols;
  T *dxr = dx + blockIdx.x * cols;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dot += detail::load(dyr + j) * detail::load(yr + j);
  dot = detail::blockSum(dot, scratch);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(dxr + j, detail::load(yr + j) * (detail::load(dyr + j) - dot));
}

} // namespace

cudaError_t softmax(int64_t rows, int64_t cols, const float *x, float *y, cudaStream_t stream) {
  if (!detail::validRows(rows, cols))
    return cudaErrorInvalidValue;
  softmaxKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(cols, x, y);
  return detail::launched();
}

cudaError_t softmaxGrad(int64_t rows, int64_t cols, const float *y, const float *dy, float *dx,
                        cudaStream_t stream) {
  if (!detail::validRows(rows, cols))
    return cudaErrorInvalidValue;
  softmaxGradKernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(cols, y, dy, dx);
  return detail::launched();
}

} // namespace tessel::cuda
