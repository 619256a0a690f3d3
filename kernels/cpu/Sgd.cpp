//===- Sgd.cpp - SGD with momentum over many tensors ----------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

namespace tessel::cpu {

void sgd(const SgdArgs &args, const SgdTensor *tensors, size_t count) {
  const float lr = args.lr, momentum = args.momentum, decay = args.weightDecay,
              scale = args.gradScale;
  detail::forEachChunk(tensors, count, [&](const SgdTensor &t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float d = t.grad[i] * scale + decay * t.param[i];
      t.momentum[i] = momentum * t.momentum[i] + d;
      t.param[i] -= lr * t.momentum[i];
    }
  });
}

} // namespace tessel::cpu
