//===- Elementwise.cu - Fill, maps, strided binary, select and copy -------===//
//
// The CPU counterparts are in kernels/cpu/Elementwise.cpp; the formulas are the same (GELU as
// x sigmoid(2u), the derivatives from y where the CPU takes them from y).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

using detail::kMapThreads;
using detail::mapBlocks;

// As kernels/cpu/Elementwise.cpp: GPT-2's GELU constants and the exact GELU's.
constexpr float kGeluBeta = 0.7978845608028654f;
constexpr float kGeluKappa = 0.044715f;
constexpr float kSqrtHalf = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

/// The shape of an output and the strides of up to N operands, by value into a kernel.
template <int N> struct Indexing {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t stride[N][kMaxRank] = {};
};

/// Operand k's offset of output element `linear` (row-major over the shape).
template <int N> __device__ inline int64_t offsetOf(const Indexing<N> &ix, int k, int64_t linear) {
  int64_t offset = 0;
  for (int d = ix.rank - 1; d >= 0; --d) {
    const int64_t i = linear % ix.size[d];
    linear /= ix.size[d];
    offset += i * ix.stride[k][d];
  }
  return offset;
}

template <int N>
bool makeIndexing(const Shape &shape, const Strides *const (&strides)[N], Indexing<N> &ix) {
  if (shape.rank < 0 || shape.rank > kMaxRank)
    return false;
  ix.rank = shape.rank;
  for (int d = 0; d < shape.rank; ++d) {
    if (shape.size[d] <= 0)
      return false;
    ix.size[d] = shape.size[d];
    for (int k = 0; k < N; ++k)
      ix.stride[k][d] = strides[k]->stride[d];
  }
  return true;
}

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

template <class T> __global__ void fillKernel(int64_t n, float value, T *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, value);
}

template <class T> __global__ void positionsKernel(int64_t n, T *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, static_cast<float>(i));
}

template <class T>
__global__ void binaryKernel(BinaryKind kind, int64_t n, Indexing<2> ix, const T *a, const T *b,
                             T *out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(out + i, applyBinary(kind, detail::load(a + offsetOf(ix, 0, i)),
                                       detail::load(b + offsetOf(ix, 1, i))));
}

template <class T>
__global__ void selectKernel(int64_t n, Indexing<3> ix, const T *c, const T *a, const T *b,
                             T *out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const bool pick = detail::load(c + offsetOf(ix, 0, i)) != 0.0f;
    detail::store(out + i, pick ? detail::load(a + offsetOf(ix, 1, i))
                                : detail::load(b + offsetOf(ix, 2, i)));
  }
}

template <class T> __global__ void copyKernel(int64_t n, Indexing<1> ix, const T *x, T *out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = x[offsetOf(ix, 0, i)];
}

template <class T>
__global__ void unaryKernel(UnaryKind kind, int64_t n, const T *x, T *y, float exponent) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, applyUnary(kind, detail::load(x + i), exponent));
}

template <class T>
__global__ void unaryGradKernel(UnaryKind kind, int64_t n, const T *x, const T *y, const T *dy,
                                T *dx, float exponent) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(dx + i, applyUnaryGrad(kind, detail::load(x + i), detail::load(y + i),
                                         detail::load(dy + i), exponent));
}

} // namespace

cudaError_t fill(int64_t n, float value, float *y, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  fillKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, value, y);
  return detail::launched();
}

cudaError_t positions(int64_t n, float *y, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  positionsKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, y);
  return detail::launched();
}

cudaError_t binary(BinaryKind kind, const Shape &shape, const float *a, const Strides &sa,
                   const float *b, const Strides &sb, float *out, cudaStream_t stream) {
  Indexing<2> ix;
  const Strides *strides[2] = {&sa, &sb};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  binaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, ix, a, b, out);
  return detail::launched();
}

cudaError_t select(const Shape &shape, const float *c, const Strides &sc, const float *a,
                   const Strides &sa, const float *b, const Strides &sb, float *out,
                   cudaStream_t stream) {
  Indexing<3> ix;
  const Strides *strides[3] = {&sc, &sa, &sb};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, ix, c, a, b, out);
  return detail::launched();
}

cudaError_t stridedCopy(const Shape &shape, const float *x, const Strides &sx, float *out,
                        cudaStream_t stream) {
  Indexing<1> ix;
  const Strides *strides[1] = {&sx};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  copyKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, ix, x, out);
  return detail::launched();
}

cudaError_t unary(UnaryKind kind, int64_t n, const float *x, float *y, float exponent,
                  cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  unaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, x, y, exponent);
  return detail::launched();
}

cudaError_t unaryGrad(UnaryKind kind, int64_t n, const float *x, const float *y, const float *dy,
                      float *dx, float exponent, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  unaryGradKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, x, y, dy, dx, exponent);
  return detail::launched();
}

} // namespace tessel::cuda
