//===- ElementwiseOps.cuh - The elementwise functions, per element -*- CUDA -*-===//
//
// Private to kernels/cuda: the per-element functions of the elementwise kernels
// (Elementwise.cu), of the fused elementwise interpreter (FusedElementwise.cu) and of the fused
// kernels generated at plan load (FusedSource.cpp embeds this file's text in the source it
// gives NVRTC), one definition for all three so that a fused step computes exactly as its
// unfused kernel does. The CPU counterparts are in kernels/cpu/Elementwise.cpp; the formulas
// are the same (GELU as x sigmoid(2u), the derivatives from y where the CPU takes them from y).
//
// Under NVRTC (__CUDACC_RTC__) nothing is included: the generated source declares UnaryKind
// and BinaryKind before this text, and the math functions are NVRTC's built-ins. So this file
// holds device code only, with no host headers.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_ELEMENTWISEOPS_CUH
#define TESSEL_KERNELS_CUDA_ELEMENTWISEOPS_CUH

#ifndef __CUDACC_RTC__
#include "kernels/cuda/Common.cuh"
#endif

namespace tessel::cuda::detail {

// As kernels/cpu/Elementwise.cpp: GPT-2's GELU constants and the exact GELU's.
constexpr float kGeluBeta = 0.7978845608028654f;
constexpr float kGeluKappa = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__device__ inline float sigmoid(float v) { return 1.0f / (1.0f + expf(-v)); }

__device__ inline float applyBinary(BinaryKind kind, float p, float q) {
  switch (kind) {
  case BinaryKind::Add:
    return p + q;
  case BinaryKind::Sub:
    return p - q;
  case BinaryKind::Mul:
    return p * q;
  case BinaryKind::Div:
    return p / q;
  case BinaryKind::Lt:
    return p < q ? 1.0f : 0.0f;
  case BinaryKind::Le:
    return p <= q ? 1.0f : 0.0f;
  case BinaryKind::Gt:
    return p > q ? 1.0f : 0.0f;
  case BinaryKind::Ge:
    return p >= q ? 1.0f : 0.0f;
  case BinaryKind::Eq:
    return p == q ? 1.0f : 0.0f;
  case BinaryKind::Ne:
    return p != q ? 1.0f : 0.0f;
  }
  return 0.0f;
}

__device__ inline float applyUnary(UnaryKind kind, float v, float exponent) {
  switch (kind) {
  case UnaryKind::Neg:
    return -v;
  case UnaryKind::Exp:
    return expf(v);
  case UnaryKind::Log:
    return logf(v);
  case UnaryKind::Sqrt:
    return sqrtf(v);
  case UnaryKind::Rsqrt:
    return 1.0f / sqrtf(v);
  case UnaryKind::Tanh:
    return tanhf(v);
  case UnaryKind::Gelu: {
    const float u = (v + v * v * v * kGeluKappa) * kGeluBeta;
    return v * sigmoid(u + u);
  }
  case UnaryKind::Silu:
    return v * sigmoid(v);
  case UnaryKind::Relu:
    return v < 0.0f ? 0.0f : v;
  case UnaryKind::Sigmoid:
    return sigmoid(v);
  case UnaryKind::Square:
    return v * v;
  case UnaryKind::Pow:
    return powf(v, exponent);
  case UnaryKind::GeluErf:
    return 0.5f * v * (1.0f + erff(v * kSqrtHalf));
  }
  return 0.0f;
}

/// dy * f'(x), from x or y = f(x) as cpu::unaryGrad takes it.
__device__ inline float applyUnaryGrad(UnaryKind kind, float x, float y, float d, float exponent) {
  switch (kind) {
  case UnaryKind::Neg:
    return -d;
  case UnaryKind::Exp:
    return d * y;
  case UnaryKind::Log:
    return d / x;
  case UnaryKind::Sqrt:
    return d / (y + y);
  case UnaryKind::Rsqrt:
    return d * y * y * y * -0.5f;
  case UnaryKind::Tanh:
    return d * (1.0f - y * y);
  case UnaryKind::Gelu: {
    const float x2 = x * x;
    const float u = (x + x * x2 * kGeluKappa) * kGeluBeta;
    const float s = sigmoid(u + u);
    const float du = (x2 * (3.0f * kGeluKappa) + 1.0f) * kGeluBeta;
    return d * (s + (x + x) * s * (1.0f - s) * du);
  }
  case UnaryKind::Silu: {
    const float s = sigmoid(x);
    return d * s * (x * (1.0f - s) + 1.0f);
  }
  case UnaryKind::Relu:
    return x > 0.0f ? d : 0.0f;
  case UnaryKind::Sigmoid:
    return d * y * (1.0f - y);
  case UnaryKind::Square:
    return d * (x + x);
  case UnaryKind::Pow:
    return d * exponent * powf(x, exponent - 1.0f);
  case UnaryKind::GeluErf:
    return d * (0.5f * (1.0f + erff(x * kSqrtHalf)) + x * kInvSqrt2Pi * expf(-0.5f * x * x));
  }
  return 0.0f;
}

} // namespace tessel::cuda::detail

#endif // TESSEL_KERNELS_CUDA_ELEMENTWISEOPS_CUH
