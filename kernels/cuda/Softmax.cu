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

template <class In, class Out> __global__ void softmaxKernel(int64_t cols, In x, Out y) {
  __shared__ float scratch[32];
  const In xr = x + blockIdx.x * cols;
  const Out yr = y + blockIdx.x * cols;
  const float2 s = detail::rowMaxAndSumExp(cols, xr, scratch);
  const float max = s.x, inv = 1.0f / s.y;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(yr + j, expf(detail::load(xr + j) - max) * inv);
}

template <class In, class Out>
__global__ void softmaxGradKernel(int64_t cols, In y, In dy, Out dx) {
  __shared__ float scratch[32];
  const In yr = y + blockIdx.x * cols, dyr = dy + blockIdx.x * cols;
  const Out dxr = dx + blockIdx.x * cols;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dot += detail::load(dyr + j) * detail::load(yr + j);
  dot = detail::blockSum(dot, scratch);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store(dxr + j, detail::load(yr + j) * (detail::load(dyr + j) - dot));
}

} // namespace

cudaError_t softmax(int64_t rows, int64_t cols, ConstFloats x, Floats y, cudaStream_t stream) {
  if (!detail::validRows(rows, cols))
    return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(rows);
  if (detail::allF32(x, y))
    softmaxKernel<<<blocks, kRowThreads, 0, stream>>>(cols, detail::f32(x), detail::f32(y));
  else
    softmaxKernel<<<blocks, kRowThreads, 0, stream>>>(cols, x, y);
  return detail::launched();
}

cudaError_t softmaxGrad(int64_t rows, int64_t cols, ConstFloats y, ConstFloats dy, Floats dx,
                        cudaStream_t stream) {
  if (!detail::validRows(rows, cols))
    return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(rows);
  if (detail::allF32(y, dy, dx))
    softmaxGradKernel<<<blocks, kRowThreads, 0, stream>>>(cols, detail::f32(y), detail::f32(dy),
                                                          detail::f32(dx));
  else
    softmaxGradKernel<<<blocks, kRowThreads, 0, stream>>>(cols, y, dy, dx);
  return detail::launched();
}

} // namespace tessel::cuda
