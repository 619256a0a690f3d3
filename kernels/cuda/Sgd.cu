//===- Sgd.cu - SGD with momentum over one tensor -------------------------===//
//
// The CPU counterpart is the sgd handler (runtime/device/cpu/CpuKernelCalls.cpp), as
// torch.optim.SGD without dampening or Nesterov: the buffer starts at zero, so the first step's
// buffer is the gradient itself. The learning rate and the gradient's scale are read from
// device memory, where the step computed them.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

__global__ void sgdKernel(int64_t n, float momentum, float decay, const float *lrAt,
                          const float *scaleAt, const float *grad, float *param, float *buf) {
  const float lr = *lrAt, scale = *scaleAt;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float d = grad[i] * scale + decay * param[i];
    buf[i] = momentum * buf[i] + d;
    param[i] -= lr * buf[i];
  }
}

} // namespace

cudaError_t sgd(int64_t n, float momentum, float weightDecay, const float *lr,
                const float *gradScale, const float *grad, float *param, float *momentumBuffer,
                cudaStream_t stream) {
  if (n < 0 || !lr || !gradScale)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  sgdKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(
      n, momentum, weightDecay, lr, gradScale, grad, param, momentumBuffer);
  return detail::launched();
}

} // namespace tessel::cuda
