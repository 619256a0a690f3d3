//===- Elementwise.cu - Fill, maps, strided binary, select and copy -------===//
//
// The CPU counterparts are in kernels/cpu/Elementwise.cpp; the formulas are the same (GELU as
// x sigmoid(2u), the derivatives from y where the CPU takes them from y).
//
// These kernels are bound by memory. Where every operand of a call has one element type they
// run on plain pointers of that type (no per-element switch on the type); where the operands
// are dense in the output's order (maps, fills, and binary and select calls without
// broadcasting) each thread takes groups of eight elements, 16 bytes at a time where the
// operands are aligned (RowGroups.cuh); otherwise every operand's offset is computed from the
// output's index, in 32-bit arithmetic wherever the offsets fit. Each element's arithmetic is
// the same on every path.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/ElementwiseOps.cuh"
#include "kernels/cuda/Indexing.cuh"
#include "kernels/cuda/RowGroups.cuh"

#include <type_traits>

namespace tessel::cuda {

namespace {

using detail::applyBinary;
using detail::applyUnary;
using detail::applyUnaryGrad;
using detail::Indexing;
using detail::kGroup;
using detail::kMapThreads;
using detail::loadGroup;
using detail::makeIndexing;
using detail::mapBlocks;
using detail::offsetOf;
using detail::storeGroup;

/// Whether every operand starts on a 16-byte boundary, so that its dense groups of eight may
/// be read and written whole.
template <class... Operands> bool alignedBases(const Operands &...ops) {
  return ((reinterpret_cast<uintptr_t>(ops.data) % 16 == 0) && ...);
}

int64_t groupsOf(int64_t n) { return (n + kGroup - 1) / kGroup; }

__device__ inline int64_t groupsOfDevice(int64_t n) { return (n + kGroup - 1) / kGroup; }

template <class Out> __global__ void fillKernel(int64_t n, float value, Out y, bool vector) {
  float v[kGroup];
  for (float &e : v)
    e = value;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOfDevice(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t left = n - g * kGroup;
    storeGroup(y, g, left < kGroup ? static_cast<int>(left) : kGroup, vector, v);
  }
}

template <class T> __global__ void positionsKernel(int64_t n, T *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, static_cast<float>(i));
}

template <class In, class Out>
__global__ void denseBinaryKernel(BinaryKind kind, int64_t n, In a, In b, Out out, bool vector) {
  float va[kGroup], vb[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOfDevice(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int count = loadGroup(a, n, g, vector, va);
    loadGroup(b, n, g, vector, vb);
    for (int i = 0; i < count; ++i)
      va[i] = applyBinary(kind, va[i], vb[i]);
    storeGroup(out, g, count, vector, va);
  }
}

template <class I, class In, class Out>
__global__ void binaryKernel(BinaryKind kind, I n, Indexing<2> ix, In a, In b, Out out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    detail::store(out + i, applyBinary(kind, detail::load(a + offsetOf(ix, 0, i)),
                                       detail::load(b + offsetOf(ix, 1, i))));
}

template <class In, class Out>
__global__ void denseSelectKernel(int64_t n, In c, In a, In b, Out out, bool vector) {
  float vc[kGroup], va[kGroup], vb[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOfDevice(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int count = loadGroup(c, n, g, vector, vc);
    loadGroup(a, n, g, vector, va);
    loadGroup(b, n, g, vector, vb);
    for (int i = 0; i < count; ++i)
      va[i] = vc[i] != 0.0f ? va[i] : vb[i];
    storeGroup(out, g, count, vector, va);
  }
}

template <class I, class In, class Out>
__global__ void selectKernel(I n, Indexing<3> ix, In c, In a, In b, Out out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const bool pick = detail::load(c + offsetOf(ix, 0, i)) != 0.0f;
    detail::store(out + i, pick ? detail::load(a + offsetOf(ix, 1, i))
                                : detail::load(b + offsetOf(ix, 2, i)));
  }
}

template <class I, class T> __global__ void copyKernel(I n, Indexing<1> ix, const T *x, T *out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = x[offsetOf(ix, 0, i)];
}

/// A copy between element types: each element widened and rounded to the output's type.
template <class I>
__global__ void convertingCopyKernel(I n, Indexing<1> ix, ConstFloats x, Floats out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    detail::store(out + i, detail::load(x + offsetOf(ix, 0, i)));
}

template <class In, class Out>
__global__ void unaryKernel(UnaryKind kind, int64_t n, In x, Out y, float exponent, bool vector) {
  float v[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOfDevice(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int count = loadGroup(x, n, g, vector, v);
    for (int i = 0; i < count; ++i)
      v[i] = applyUnary(kind, v[i], exponent);
    storeGroup(y, g, count, vector, v);
  }
}

template <class In, class Out>
__global__ void unaryGradKernel(UnaryKind kind, int64_t n, In x, In y, In dy, Out dx,
                                float exponent, bool vector) {
  float vx[kGroup], vy[kGroup], vd[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOfDevice(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int count = loadGroup(x, n, g, vector, vx);
    loadGroup(y, n, g, vector, vy);
    loadGroup(dy, n, g, vector, vd);
    for (int i = 0; i < count; ++i)
      vx[i] = applyUnaryGrad(kind, vx[i], vy[i], vd[i], exponent);
    storeGroup(dx, g, count, vector, vx);
  }
}

/// Calls launch(index) with the index type of the strided kernels: 32-bit where it fits.
template <int N, class Launch> void withIndexType(const Indexing<N> &ix, int64_t n, Launch launch) {
  if (detail::fitsIn32(ix, n))
    launch(static_cast<uint32_t>(n));
  else
    launch(n);
}

} // namespace

cudaError_t fill(int64_t n, float value, Floats y, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const bool vector = alignedBases(y);
  detail::withElementType(
      [&](auto ty) {
        fillKernel<<<mapBlocks(groupsOf(n)), kMapThreads, 0, stream>>>(n, value, ty, vector);
      },
      y);
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
  if (detail::isDense(ix)) {
    const bool vector = alignedBases(a, b, out);
    detail::withElementType(
        [&](auto ta, auto tb, auto tout) {
          denseBinaryKernel<<<mapBlocks(groupsOf(n)), kMapThreads, 0, stream>>>(kind, n, ta, tb,
                                                                                tout, vector);
        },
        a, b, out);
    return detail::launched();
  }
  withIndexType(ix, n, [&](auto count) {
    detail::withElementType(
        [&](auto ta, auto tb, auto tout) {
          binaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, count, ix, ta, tb, tout);
        },
        a, b, out);
  });
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
  if (detail::isDense(ix)) {
    const bool vector = alignedBases(c, a, b, out);
    detail::withElementType(
        [&](auto tc, auto ta, auto tb, auto tout) {
          denseSelectKernel<<<mapBlocks(groupsOf(n)), kMapThreads, 0, stream>>>(n, tc, ta, tb, tout,
                                                                                vector);
        },
        c, a, b, out);
    return detail::launched();
  }
  withIndexType(ix, n, [&](auto count) {
    detail::withElementType(
        [&](auto tc, auto ta, auto tb, auto tout) {
          selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(count, ix, tc, ta, tb, tout);
        },
        c, a, b, out);
  });
  return detail::launched();
}

namespace {

/// A copy over `shape` read through `sx`: moving elements of one type (T) or converting them
/// (ConstFloats to Floats); a dense copy of one type is a memcpy.
template <class In, class Out>
cudaError_t launchCopy(const Shape &shape, In x, const Strides &sx, Out out, size_t elementBytes,
                       cudaStream_t stream) {
  Indexing<1> ix;
  const Strides *strides[1] = {&sx};
  if (!makeIndexing(shape, strides, ix))
    return cudaErrorInvalidValue;
  const int64_t n = shape.numElements();
  if constexpr (std::is_pointer_v<In>) {
    if (detail::isDense(ix) && static_cast<const void *>(x) == static_cast<const void *>(out))
      return cudaSuccess;
    if (detail::isDense(ix))
      return cudaMemcpyAsync(out, x, static_cast<size_t>(n) * elementBytes,
                             cudaMemcpyDeviceToDevice, stream);
  }
  withIndexType(ix, n, [&](auto count) {
    if constexpr (std::is_pointer_v<In>)
      copyKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(count, ix, x, out);
    else
      convertingCopyKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(count, ix, x, out);
  });
  return detail::launched();
}

} // namespace

cudaError_t stridedCopy(const Shape &shape, ConstFloats x, const Strides &sx, Floats out,
                        cudaStream_t stream) {
  if (x.type == out.type && x.type != ElementType::F32)
    return stridedCopyBits16(shape, static_cast<const uint16_t *>(x.data), sx,
                             static_cast<uint16_t *>(out.data), stream);
  if (detail::allF32(x, out))
    return launchCopy(shape, detail::f32(x), sx, detail::f32(out), sizeof(float), stream);
  return launchCopy(shape, x, sx, out, 0, stream);
}

cudaError_t stridedCopyBits16(const Shape &shape, const uint16_t *x, const Strides &sx,
                              uint16_t *out, cudaStream_t stream) {
  return launchCopy(shape, x, sx, out, sizeof(uint16_t), stream);
}

cudaError_t unary(UnaryKind kind, int64_t n, ConstFloats x, Floats y, float exponent,
                  cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const bool vector = alignedBases(x, y);
  detail::withElementType(
      [&](auto tx, auto ty) {
        unaryKernel<<<mapBlocks(groupsOf(n)), kMapThreads, 0, stream>>>(kind, n, tx, ty, exponent,
                                                                        vector);
      },
      x, y);
  return detail::launched();
}

cudaError_t unaryGrad(UnaryKind kind, int64_t n, ConstFloats x, ConstFloats y, ConstFloats dy,
                      Floats dx, float exponent, cudaStream_t stream) {
  if (n < 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  const bool vector = alignedBases(x, y, dy, dx);
  detail::withElementType(
      [&](auto tx, auto ty, auto tdy, auto tdx) {
        unaryGradKernel<<<mapBlocks(groupsOf(n)), kMapThreads, 0, stream>>>(kind, n, tx, ty, tdy,
                                                                            tdx, exponent, vector);
      },
      x, y, dy, dx);
  return detail::launched();
}

} // namespace tessel::cuda
