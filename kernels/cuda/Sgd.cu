//===- Sgd.cu - SGD with momentum over many tensors -----------------------===//
//
// As cpu::sgd (kernels/cpu/Sgd.cpp), torch.optim.SGD without dampening or Nesterov: the
// buffer starts at zero, so the first step's buffer is the gradient itself. The learning rate
// and the gradient's scale are read from device memory, where the step computed them; every
// tensor of a call is updated in as few launches as MultiTensor.cuh's tables take.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/MultiTensor.cuh"

namespace tessel::cuda {

namespace {

enum Role { Param, Grad, Momentum, Roles };
using Table = detail::MultiTensorTable<Roles>;

__global__ void sgdKernel(float momentum, float decay, const float *lrAt, const float *scaleAt,
                          Table table) {
  int64_t begin, end;
  const int t = detail::blockRange(table, begin, end);
  float *param = static_cast<float *>(table.ptr[Param][t]);
  const float *grad = static_cast<const float *>(table.ptr[Grad][t]);
  float *buf = static_cast<float *>(table.ptr[Momentum][t]);
  const float lr = *lrAt, scale = *scaleAt;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float d = grad[i] * scale + decay * param[i];
    buf[i] = momentum * buf[i] + d;
    param[i] -= lr * buf[i];
  }
}

} // namespace

cudaError_t sgd(const SgdArgs &args, const SgdTensor *tensors, size_t count, cudaStream_t stream) {
  if (!args.lr || !args.gradScale || (count && !tensors))
    return cudaErrorInvalidValue;
  for (size_t t = 0; t < count; ++t)
    if (tensors[t].n < 0 ||
        (tensors[t].n && (!tensors[t].param || !tensors[t].grad || !tensors[t].momentum)))
      return cudaErrorInvalidValue;
  return detail::forEachTable<Roles>(
      count, [&](size_t t) { return tensors[t].n; },
      [&](size_t t, void **ptrs) {
        const SgdTensor &x = tensors[t];
        ptrs[Param] = x.param;
        ptrs[Grad] = const_cast<float *>(x.grad);
        ptrs[Momentum] = x.momentum;
      },
      [&](const Table &table, int blocks) {
        sgdKernel<<<blocks, detail::kMapThreads, 0, stream>>>(args.momentum, args.weightDecay,
                                                              args.lr, args.gradScale, table);
        return detail::launched();
      });
}

} // namespace tessel::cuda
