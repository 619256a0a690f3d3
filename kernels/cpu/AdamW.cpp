//===- AdamW.cpp - The AdamW step over many tensors -----------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include <cmath>

namespace tessel::cpu {

void adamw(const AdamWArgs &args, const AdamWTensor *tensors, size_t count) {
  // torch.optim.AdamW's single-tensor step, in its order: p *= 1 - lr * wd; m.lerp_(g, 1 - b1)
  // (m = b1 m + (1 - b1) g, written as torch's lerp); v = b2 v + (1 - b2) g^2; then
  // p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps). The scalars are formed in double, as
  // Python computes them, then rounded once.
  const double step = static_cast<double>(args.step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(args.beta1), step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(args.beta2), step);
  const float stepSize = static_cast<float>(args.lr / bc1);
  const float bc2Sqrt = static_cast<float>(std::sqrt(bc2));
  const float decay = static_cast<float>(1.0 - static_cast<double>(args.lr) * args.weightDecay);
  const float beta1 = args.beta1, beta2 = args.beta2;
  const float oneMinusBeta1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float oneMinusBeta2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  // lerp(m, g, w) as ATen's: m + w (g - m) for |w| < 0.5, else g - (g - m)(1 - w).
  const bool smallWeight = std::fabs(oneMinusBeta1) < 0.5f;
  const float eps = args.eps, gradScale = args.gradScale;
  detail::forEachChunk(tensors, count, [&](const AdamWTensor &t, int64_t begin, int64_t end) {
    float *param = t.param, *m = t.m, *v = t.v;
    const float *grad = t.grad;
    for (int64_t i = begin; i < end; ++i) {
      const float g = grad[i] * gradScale;
      const float p = param[i] * decay;
      const float mi =
          smallWeight ? m[i] + oneMinusBeta1 * (g - m[i]) : g - (g - m[i]) * (1.0f - oneMinusBeta1);
      const float vi = v[i] * beta2 + oneMinusBeta2 * g * g;
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) / bc2Sqrt + eps;
      param[i] = p - stepSize * mi / denom;
    }
  });
}

} // namespace tessel::cpu
