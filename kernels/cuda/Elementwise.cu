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

template <class Out> __global__ void fillKernel(int64_t n, float value, Out y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, value);
}

template <class T> __global__ void positionsKernel(int64_t n, T *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, static_cast<float>(i));
}

template <class In, class Out>
__global__ void binaryKernel(BinaryKind kind, int64_t n, Indexing<2> ix, In a, In b, Out out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(out + i, applyBinary(kind, detail::load(a + offsetOf(ix, 0, i)),
                                       detail::load(b + offsetOf(ix, 1, i))));
}

template <class In, class Out>
__global__ void selectKernel(int64_t n, Indexing<3> ix, In c, In a, In b, Out out) {
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

/// A copy between element types: each element widened and rounded to the output's type.
__global__ void convertingCopyKernel(int64_t n, Indexing<1> ix, ConstFloats x, Floats out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(out + i, detail::load(x + offsetOf(ix, 0, i)));
}

template <class In, class Out>
__global__ void unaryKernel(UnaryKind kind, int64_t n, In x, Out y, float exponent) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, applyUnary(kind, detail::load(x + i), exponent));
}

template <class In, class Out>
__global__ void unaryGradKernel(UnaryKind kind, int64_t n, In x, In y, In dy, Out dx,
                                float exponent) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(dx + i, applyUnaryGrad(kind, detail::load(x + i), detail::load(y + i),
                                         detail::load(dy + i), exponent));
}

} // namespace

cudaError_t fill(int64_t n, float value, Floats y, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  if (detail::allF32(y))
    fillKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, value, detail::f32(y));
  else
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

cudaError_t binary(BinaryKind kind, const Shape &shape, ConstFloats a, const Strides &sa,
                   ConstFloats b, const Strides &sb, Floats out, cudaStream_t stream) {
  Indexing<2> ix;
  const Strides *strides[2] = {&sa, &sb};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  if (detail::allF32(a, b, out))
    binaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, ix, detail::f32(a),
                                                           detail::f32(b), detail::f32(out));
  else
    binaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, ix, a, b, out);
  return detail::launched();
}

cudaError_t select(const Shape &shape, ConstFloats c, const Strides &sc, ConstFloats a,
                   const Strides &sa, ConstFloats b, const Strides &sb, Floats out,
                   cudaStream_t stream) {
  Indexing<3> ix;
  const Strides *strides[3] = {&sc, &sa, &sb};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  if (detail::allF32(c, a, b, out))
    selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, ix, detail::f32(c), detail::f32(a),
                                                           detail::f32(b), detail::f32(out));
  else
    selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, ix, c, a, b, out);
  return detail::launched();
}

namespace {

/// `kernel` (a copy: moving elements, or converting them) over `shape` read through `sx`.
template <class In, class Out>
cudaError_t launchCopy(void (*kernel)(int64_t, Indexing<1>, In, Out), const Shape &shape, In x,
                       const Strides &sx, Out out, cudaStream_t stream) {
  Indexing<1> ix;
  const Strides *strides[1] = {&sx};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  kernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(n, ix, x, out);
  return detail::launched();
}

} // namespace

cudaError_t stridedCopy(const Shape &shape, ConstFloats x, const Strides &sx, Floats out,
                        cudaStream_t stream) {
  if (x.type == out.type && x.type != ElementType::F32)
    return stridedCopyBits16(shape, static_cast<const uint16_t *>(x.data), sx,
                             static_cast<uint16_t *>(out.data), stream);
  if (detail::allF32(x, out))
    return launchCopy(&copyKernel<float>, shape, detail::f32(x), sx, detail::f32(out), stream);
  return launchCopy(&convertingCopyKernel, shape, x, sx, out, stream);
}

cudaError_t stridedCopyBits16(const Shape &shape, const uint16_t *x, const Strides &sx,
                              uint16_t *out, cudaStream_t stream) {
  return launchCopy(&copyKernel<uint16_t>, shape, x, sx, out, stream);
}

cudaError_t unary(UnaryKind kind, int64_t n, ConstFloats x, Floats y, float exponent,
                  cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  if (detail::allF32(x, y))
    unaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, detail::f32(x), detail::f32(y),
                                                          exponent);
  else
    unaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, x, y, exponent);
  return detail::launched();
}

cudaError_t unaryGrad(UnaryKind kind, int64_t n, ConstFloats x, ConstFloats y, ConstFloats dy,
                      Floats dx, float exponent, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  if (detail::allF32(x, y, dy, dx))
    unaryGradKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(
        kind, n, detail::f32(x), detail::f32(y), detail::f32(dy), detail::f32(dx), exponent);
  else
    unaryGradKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, n, x, y, dy, dx, exponent);
  return detail::launched();
}

} // namespace tessel::cuda
