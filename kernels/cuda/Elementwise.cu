//===- Elementwise.cu - Fill, maps, strided binary, select and copy -------===//
//
// The CPU counterparts are in kernels/cpu/Elementwise.cpp; the formulas are the same (GELU as
// x sigmoid(2u), the derivatives from y where the CPU takes them from y).
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/ElementwiseOps.cuh"
#include "kernels/cuda/Indexing.cuh"

namespace tessel::cuda {

namespace {

using detail::applyBinary;
using detail::applyUnary;
using detail::applyUnaryGrad;
using detail::Indexing;
using detail::kMapThreads;
using detail::makeIndexing;
using detail::mapBlocks;
using detail::offsetOf;

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

namespace {

template <class T>
cudaError_t launchCopy(const Shape &shape, const T *x, const Strides &sx, T *out,
                       cudaStream_t stream) {
  Indexing<1> ix;
  const Strides *strides[1] = {&sx};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  copyKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, ix, x, out);
  return detail::launched();
}

} // namespace

cudaError_t stridedCopy(const Shape &shape, const float *x, const Strides &sx, float *out,
                        cudaStream_t stream) {
  return launchCopy(shape, x, sx, out, stream);
}

cudaError_t stridedCopyBits16(const Shape &shape, const uint16_t *x, const Strides &sx,
                              uint16_t *out, cudaStream_t stream) {
  return launchCopy(shape, x, sx, out, stream);
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
