//===- Elementwise.cu - Fill, maps, strided binary, select and copy -------===//
//
// The CPU counterparts are in kernels/cpu/Elementwise.cpp; the formulas are the same (GELU as
// x sigmoid(2u), the derivatives from y where the CPU takes them from y).
//
// These kernels are bound by memory. Where every operand of a call has one element type they
// run on plain pointers of that type (no per-element switch on the type). Where the operands
// are dense in the output's order (maps, fills, dense converting copies, and binary and select
// calls without broadcasting) each thread takes groups of eight elements, 16 bytes at a time
// where the operands are aligned (RowGroups.cuh). Where every operand reads the innermost dim
// in order or repeats one value along it (a bias added to every row) the groups are a row's,
// each finding its row once (Rows in Indexing.cuh). Otherwise every operand's offset is
// computed from the output's index, in 32-bit arithmetic wherever the offsets fit. Each
// element's arithmetic is the same on every path.
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
using detail::groupCount;
using detail::groupsOf;
using detail::Indexing;
using detail::kGroup;
using detail::kMapThreads;
using detail::loadGroup;
using detail::makeIndexing;
using detail::mapBlocks;
using detail::Offsets;
using detail::offsetsOf;
using detail::Rows;
using detail::storeGroup;

/// Whether every operand starts on a 16-byte boundary, so that its dense groups of eight may
/// be read and written whole.
template <class... Operands> bool alignedBases(const Operands &...ops) {
  return ((reinterpret_cast<uintptr_t>(ops.data) % 16 == 0) && ...);
}

/// Group g of a Rows call: its row and its group within the row, and every operand's offset
/// of the row's first element.
template <class I, int N>
__device__ inline void locate(const Rows<I, N> &rows, I g, I &row, I &group, I (&start)[N]) {
  row = rows.groupsPerRow.div(g);
  group = g - row * static_cast<I>(rows.groupsPerRow.divisor);
  offsetsOf(rows.starts, row, start);
}

/// Group `group` of the row of operand k that starts at `xr`: read in order, or the row's one
/// value repeated. Returns how many of the group's elements exist, as loadGroup does.
template <class In>
__device__ inline int loadRowGroup(In xr, bool repeats, int64_t cols, int64_t group, bool vector,
                                   float (&v)[kGroup]) {
  if (!repeats)
    return loadGroup(xr, cols, group, vector, v);
  const int count = groupCount(cols, group);
  const float value = detail::load(xr);
  for (int i = 0; i < count; ++i)
    v[i] = value;
  return count;
}

template <class Out> __global__ void fillKernel(int64_t n, float value, Out y, bool vector) {
  float v[kGroup];
  for (float &e : v)
    e = value;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOf(n);
       g += int64_t(gridDim.x) * blockDim.x)
    storeGroup(y, g, groupCount(n, g), vector, v);
}

template <class T> __global__ void positionsKernel(int64_t n, T *y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    detail::store(y + i, static_cast<float>(i));
}

template <class In, class Out>
__global__ void denseBinaryKernel(BinaryKind kind, int64_t n, In a, In b, Out out, bool vector) {
  float va[kGroup], vb[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOf(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int count = loadGroup(a, n, g, vector, va);
    loadGroup(b, n, g, vector, vb);
    for (int i = 0; i < count; ++i)
      va[i] = applyBinary(kind, va[i], vb[i]);
    storeGroup(out, g, count, vector, va);
  }
}

template <class I, class In, class Out>
__global__ void rowBinaryKernel(BinaryKind kind, I groups, Rows<I, 2> rows, In a, In b, Out out,
                                bool vector) {
  float va[kGroup], vb[kGroup];
  for (I g = blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += gridDim.x * blockDim.x) {
    I row, group, start[2];
    locate(rows, g, row, group, start);
    const int count = loadRowGroup(a + start[0], rows.repeats[0], rows.cols, group, vector, va);
    loadRowGroup(b + start[1], rows.repeats[1], rows.cols, group, vector, vb);
    for (int i = 0; i < count; ++i)
      va[i] = applyBinary(kind, va[i], vb[i]);
    storeGroup(out + row * rows.cols, group, count, vector, va);
  }
}

template <class I, class In, class Out>
__global__ void binaryKernel(BinaryKind kind, I n, Offsets<I, 2> ix, In a, In b, Out out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    I offset[2];
    offsetsOf(ix, i, offset);
    detail::store(out + i,
                  applyBinary(kind, detail::load(a + offset[0]), detail::load(b + offset[1])));
  }
}

template <class In, class Out>
__global__ void denseSelectKernel(int64_t n, In c, In a, In b, Out out, bool vector) {
  float vc[kGroup], va[kGroup], vb[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOf(n);
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
__global__ void rowSelectKernel(I groups, Rows<I, 3> rows, In c, In a, In b, Out out, bool vector) {
  float vc[kGroup], va[kGroup], vb[kGroup];
  for (I g = blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += gridDim.x * blockDim.x) {
    I row, group, start[3];
    locate(rows, g, row, group, start);
    const int count = loadRowGroup(c + start[0], rows.repeats[0], rows.cols, group, vector, vc);
    loadRowGroup(a + start[1], rows.repeats[1], rows.cols, group, vector, va);
    loadRowGroup(b + start[2], rows.repeats[2], rows.cols, group, vector, vb);
    for (int i = 0; i < count; ++i)
      va[i] = vc[i] != 0.0f ? va[i] : vb[i];
    storeGroup(out + row * rows.cols, group, count, vector, va);
  }
}

template <class I, class In, class Out>
__global__ void selectKernel(I n, Offsets<I, 3> ix, In c, In a, In b, Out out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    I offset[3];
    offsetsOf(ix, i, offset);
    const bool pick = detail::load(c + offset[0]) != 0.0f;
    detail::store(out + i, pick ? detail::load(a + offset[1]) : detail::load(b + offset[2]));
  }
}

template <class I, class T> __global__ void copyKernel(I n, Offsets<I, 1> ix, const T *x, T *out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    I offset[1];
    offsetsOf(ix, i, offset);
    out[i] = x[offset[0]];
  }
}

/// A copy between element types: each element widened and rounded to the output's type.
template <class I>
__global__ void convertingCopyKernel(I n, Offsets<I, 1> ix, ConstFloats x, Floats out) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    I offset[1];
    offsetsOf(ix, i, offset);
    detail::store(out + i, detail::load(x + offset[0]));
  }
}

/// The same for a dense x, on plain pointers of the two element types.
template <class In, class Out>
__global__ void denseConvertKernel(int64_t n, In x, Out out, bool vector) {
  float v[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOf(n);
       g += int64_t(gridDim.x) * blockDim.x)
    storeGroup(out, g, loadGroup(x, n, g, vector, v), vector, v);
}

template <class In, class Out>
__global__ void unaryKernel(UnaryKind kind, int64_t n, In x, Out y, float exponent, bool vector) {
  float v[kGroup];
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOf(n);
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
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groupsOf(n);
       g += int64_t(gridDim.x) * blockDim.x) {
    const int count = loadGroup(x, n, g, vector, vx);
    loadGroup(y, n, g, vector, vy);
    loadGroup(dy, n, g, vector, vd);
    for (int i = 0; i < count; ++i)
      vx[i] = applyUnaryGrad(kind, vx[i], vy[i], vd[i], exponent);
    storeGroup(dx, g, count, vector, vx);
  }
}

/// Calls launch(count) with n in the index type of the strided kernels: uint32_t where every
/// index and offset fits (see fitsIn32), else int64_t.
template <int N, class Launch> void withIndexType(const Indexing<N> &ix, int64_t n, Launch launch) {
  if (detail::fitsIn32(ix, n))
    launch(static_cast<uint32_t>(n));
  else
    launch(n);
}

/// Calls launch(x, out) with both as plain pointers of their own element types.
template <class Launch> void withElementTypes(ConstFloats x, Floats out, Launch launch) {
  auto withOut = [&](auto in) {
    switch (out.type) {
    case DType::BF16:
      return launch(in, detail::typed<__nv_bfloat16>(out));
    case DType::F16:
      return launch(in, detail::typed<__half>(out));
    default:
      return launch(in, detail::typed<float>(out));
    }
  };
  switch (x.type) {
  case DType::BF16:
    return withOut(detail::typed<__nv_bfloat16>(x));
  case DType::F16:
    return withOut(detail::typed<__half>(x));
  default:
    return withOut(detail::typed<float>(x));
  }
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
  if (detail::hasRows(ix)) {
    const bool vector = detail::rowsAligned(ix, out, a, b);
    withIndexType(ix, n, [&](auto count) {
      using I = decltype(count);
      const Rows<I, 2> rows = detail::rowsFor<I>(ix);
      const I groups = detail::groupsOf(rows, n);
      detail::withElementType(
          [&](auto ta, auto tb, auto tout) {
            rowBinaryKernel<<<mapBlocks(groups), kMapThreads, 0, stream>>>(kind, groups, rows, ta,
                                                                           tb, tout, vector);
          },
          a, b, out);
    });
    return detail::launched();
  }
  withIndexType(ix, n, [&](auto count) {
    const auto offsets = detail::offsetsFor<decltype(count)>(ix, ix.rank);
    detail::withElementType(
        [&](auto ta, auto tb, auto tout) {
          binaryKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(kind, count, offsets, ta, tb,
                                                                 tout);
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
  if (detail::hasRows(ix)) {
    const bool vector = detail::rowsAligned(ix, out, c, a, b);
    withIndexType(ix, n, [&](auto count) {
      using I = decltype(count);
      const Rows<I, 3> rows = detail::rowsFor<I>(ix);
      const I groups = detail::groupsOf(rows, n);
      detail::withElementType(
          [&](auto tc, auto ta, auto tb, auto tout) {
            rowSelectKernel<<<mapBlocks(groups), kMapThreads, 0, stream>>>(groups, rows, tc, ta, tb,
                                                                           tout, vector);
          },
          c, a, b, out);
    });
    return detail::launched();
  }
  withIndexType(ix, n, [&](auto count) {
    const auto offsets = detail::offsetsFor<decltype(count)>(ix, ix.rank);
    detail::withElementType(
        [&](auto tc, auto ta, auto tb, auto tout) {
          selectKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(count, offsets, tc, ta, tb, tout);
        },
        c, a, b, out);
  });
  return detail::launched();
}

namespace {

/// A copy over `shape` read through `sx`: moving elements of one type (T) or converting them
/// (ConstFloats to Floats); a dense copy of one type is a memcpy, a dense converting copy runs
/// in groups of eight on the two types' pointers.
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
  } else {
    if (detail::isDense(ix)) {
      const bool vector = alignedBases(x, out);
      withElementTypes(x, out, [&](auto tx, auto tout) {
        denseConvertKernel<<<mapBlocks(groupsOf(n)), kMapThreads, 0, stream>>>(n, tx, tout, vector);
      });
      return detail::launched();
    }
  }
  withIndexType(ix, n, [&](auto count) {
    const auto offsets = detail::offsetsFor<decltype(count)>(ix, ix.rank);
    if constexpr (std::is_pointer_v<In>)
      copyKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(count, offsets, x, out);
    else
      convertingCopyKernel<<<mapBlocks(n), kMapThreads, 0, stream>>>(count, offsets, x, out);
  });
  return detail::launched();
}

} // namespace
cudaError_t stridedCopy(const Shape &shape, ConstFloats x, const Strides &sx, Floats out,
                        cudaStream_t stream) {
  if (x.type == out.type && x.type != DType::F32)
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
