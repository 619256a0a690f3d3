//===- CudaKernels.h - The CUDA backend's kernels ---------------*- C++ -*-===//
//
// The GPU counterparts of kernels/cpu/CpuKernels.h, one layer per file, each with the same
// meaning and parameters as its CPU kernel (the reference the tests compare it with). Every
// launcher queues its work on `stream` and returns at once: pointers are device addresses,
// scalars the kernel reads from device memory (a learning rate, a loss gradient) are pointers
// too. A launcher checks its shape preconditions and returns cudaErrorInvalidValue if they do
// not hold, otherwise the launch's own error; faults inside a kernel surface at the stream's
// next synchronisation.
//
// Buffers are f32 (ids i32); the kernels compute in f32 and are templates over their storage
// type, so bf16 storage is one more instantiation behind new overloads here.
//
// Unlike the CPU kernels, these make no promise of the CPU's bits: reductions run in a fixed
// order (the same result on every run), but in f32 and in a different order from the CPU's.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_CUDAKERNELS_H
#define TESSEL_KERNELS_CUDA_CUDAKERNELS_H

#include "kernels/cpu/CpuKernels.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessel::cuda {

// The shapes, strides and operation kinds are the CPU backend's.
using cpu::BinaryKind;
using cpu::kMaxRank;
using cpu::Shape;
using cpu::Strides;
using cpu::UnaryKind;

/// Where a kernel that reads ids (cross entropy) records the first id outside [0, limit):
/// device memory, zeroed by its owner; `flag` is set once, by the first bad id found.
struct IdError {
  int flag;
  int32_t id;
  long long position;
  long long limit;
};

//===----------------------------------------------------------------------===//
// Elementwise (Elementwise.cu)
//===----------------------------------------------------------------------===//

/// y[i] = value for i < n.
cudaError_t fill(int64_t n, float value, float *y, cudaStream_t stream);
/// y[i] = i for i < n.
cudaError_t positions(int64_t n, float *y, cudaStream_t stream);
/// out[i] = a[i . sa] (op) b[i . sb] for every index i of `shape`; `out` is dense.
cudaError_t binary(BinaryKind kind, const Shape &shape, const float *a, const Strides &sa,
                   const float *b, const Strides &sb, float *out, cudaStream_t stream);
/// out[i] = c[i . sc] != 0 ? a[i . sa] : b[i . sb]; `out` is dense.
cudaError_t select(const Shape &shape, const float *c, const Strides &sc, const float *a,
                   const Strides &sa, const float *b, const Strides &sb, float *out,
                   cudaStream_t stream);
/// out[i] = x[i . sx]: permutes, broadcasts and copies.
cudaError_t stridedCopy(const Shape &shape, const float *x, const Strides &sx, float *out,
                        cudaStream_t stream);
/// y = f(x), as cpu::unary (Gelu the tanh form, GeluErf the exact one, Pow by `exponent`).
cudaError_t unary(UnaryKind kind, int64_t n, const float *x, float *y, float exponent,
                  cudaStream_t stream);
/// dx = dy * f'(x), as cpu::unaryGrad; `y` is f(x).
cudaError_t unaryGrad(UnaryKind kind, int64_t n, const float *x, const float *y, const float *dy,
                      float *dx, float exponent, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Softmax over the last dim (Softmax.cu)
//===----------------------------------------------------------------------===//

cudaError_t softmax(int64_t rows, int64_t cols, const float *x, float *y, cudaStream_t stream);
/// dx = y * (dy - sum(dy * y)) per row.
cudaError_t softmaxGrad(int64_t rows, int64_t cols, const float *y, const float *dy, float *dx,
                        cudaStream_t stream);

//===----------------------------------------------------------------------===//
// LayerNorm and RMSNorm (Norm.cu)
//===----------------------------------------------------------------------===//

/// Elements of f32 workspace the gradient kernels need for `rows` rows (their row statistics).
int64_t normGradWorkspace(int64_t rows);

/// y = (x - mean) / sqrt(var + eps) * g + b per row (biased variance).
cudaError_t layerNorm(int64_t rows, int64_t cols, const float *x, const float *g, const float *b,
                      float eps, float *y, cudaStream_t stream);
/// dx per row; dg and db summed over rows. `workspace` holds normGradWorkspace(rows) floats.
cudaError_t layerNormGrad(int64_t rows, int64_t cols, const float *x, const float *g,
                          const float *dy, float eps, float *dx, float *dg, float *db,
                          float *workspace, cudaStream_t stream);
/// y = x / sqrt(mean(x^2) + eps) * g per row.
cudaError_t rmsNorm(int64_t rows, int64_t cols, const float *x, const float *g, float eps, float *y,
                    cudaStream_t stream);
cudaError_t rmsNormGrad(int64_t rows, int64_t cols, const float *x, const float *g, const float *dy,
                        float eps, float *dx, float *dg, float *workspace, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Cross entropy over the last dim (Loss.cu)
//===----------------------------------------------------------------------===//

/// Elements of f32 workspace crossEntropy needs for `rows` rows.
int64_t crossEntropyWorkspace(int64_t rows);

/// loss[0] = the mean over rows (scaled: scale times the sum) of -log softmax(logits)[target].
/// A target outside [0, cols) is recorded in `idError` and makes the loss NaN.
cudaError_t crossEntropy(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                         bool scaled, double scale, float *loss, float *workspace, IdError *idError,
                         cudaStream_t stream);
/// dlogits = (softmax(logits) - onehot(targets)) * dloss[0] / rows (scaled: * scale instead
/// of / rows). A bad target is recorded as above and its row left as the softmax times the
/// factor.
cudaError_t crossEntropyGrad(int64_t rows, int64_t cols, const float *logits,
                             const int32_t *targets, const float *dloss, bool scaled, double scale,
                             float *dlogits, IdError *idError, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Optimizer (AdamW.cu)
//===----------------------------------------------------------------------===//

/// cpu::AdamWArgs with the two scalars the step computes on the device (the scheduled
/// learning rate, the clipping factor) read from device memory.
struct AdamWArgs {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0;
  int64_t step = 1;
  const float *lr = nullptr;        ///< One element.
  const float *gradScale = nullptr; ///< One element.
};
/// One AdamW step over n elements, as cpu::adamw.
cudaError_t adamw(const AdamWArgs &args, int64_t n, float *param, const float *grad, float *m,
                  float *v, cudaStream_t stream);

} // namespace tessel::cuda

#endif // TESSEL_KERNELS_CUDA_CUDAKERNELS_H
