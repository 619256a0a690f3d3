//===- Pack.cu - Tensors copied into one bucket ---------------------------===//
//
// The CPU counterpart is cpu::pack (kernels/cpu/Pack.cpp): input i, viewed as
// [outer, ways, chunk], lands in y as [ways, part] at its column offset in every part.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

/// Input element (o, r, c) goes to y[r * part + column + o * chunk + c].
__global__ void packKernel(int64_t outer, int64_t ways, int64_t chunk, int64_t part, int64_t column,
                           const float *x, float *y) {
  const int64_t n = outer * ways * chunk;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = e % chunk, r = (e / chunk) % ways, o = e / (chunk * ways);
    y[r * part + column + o * chunk + c] = x[e];
  }
}

} // namespace

cudaError_t pack(int64_t count, const float *const *inputs, const int64_t *outers,
                 const int64_t *chunks, int64_t ways, float *y, cudaStream_t stream) {
  if (count <= 0 || ways <= 0)
    return cudaErrorInvalidValue;
  int64_t part = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (outers[i] <= 0 || chunks[i] <= 0)
      return cudaErrorInvalidValue;
    part += outers[i] * chunks[i];
  }
  int64_t column = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = outers[i] * ways * chunks[i];
    packKernel<<<detail::mapBlocks(n), detail::kMapThreads, 0, stream>>>(
        outers[i], ways, chunks[i], part, column, inputs[i], y);
    if (cudaError_t e = detail::launched(); e != cudaSuccess)
      return e;
    column += outers[i] * chunks[i];
  }
  return cudaSuccess;
}

} // namespace tessel::cuda
