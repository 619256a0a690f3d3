//===- Rope.cu - Rotary position embedding --------------------------------===//
//
// The CPU counterpart is kernels/cpu/Rope.cpp: feature i < head/2 pairs with i + head/2 and
// turns by pos * theta^(-2i/head). The angle, its cosine and its sine are computed in f64 and
// rounded to f32 once, as the CPU computes them, so both backends turn by the same f32 factors.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"
#include "kernels/RopeFrequency.h"

namespace tessel::cuda {

namespace {

/// One thread per (row, head, pair): y[lo] = lo c - hi s, y[hi] = hi c + lo s.
template <class In, class Out>
__global__ void ropeKernel(int64_t pairs, int64_t seq, int64_t heads, int64_t half, double theta,
                           bool inverse, int64_t headStart, int64_t tailStart,
                           kernels::RopeScaling scaling, const int32_t *positions, In x, Out y) {
  const int64_t head = 2 * half;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < pairs;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e % half, rowHead = e / half; // rowHead = row * heads + h
    const int64_t p = (rowHead / heads) % seq;
    // The row's position: given (a negative one is 0), or in the whole sequence (a head-tail
    // block: two runs).
    const int64_t pos = positions       ? max(positions[rowHead / heads], 0)
                        : headStart < 0 ? p
                                        : (p < seq / 2 ? headStart + p : tailStart + p - seq / 2);
    const double angle =
        static_cast<double>(pos) * kernels::ropeFrequency(i, head, theta, scaling);
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(inverse ? -sin(angle) : sin(angle));
    const In xh = x + rowHead * head;
    const Out yh = y + rowHead * head;
    const float lo = detail::load(xh + i), hi = detail::load(xh + (i + half));
    detail::store(yh + i, lo * c - hi * s);
    detail::store(yh + (i + half), hi * c + lo * s);
  }
}

} // namespace

cudaError_t rope(int64_t batch, int64_t seq, int64_t heads, int64_t head, float theta, bool inverse,
                 ConstFloats x, Floats y, cudaStream_t stream, int64_t headStart, int64_t tailStart,
                 const kernels::RopeScaling &scaling, const int32_t *positions) {
  if (batch <= 0 || seq <= 0 || heads <= 0 || head <= 0 || head % 2 != 0)
    return cudaErrorInvalidValue;
  const int64_t pairs = batch * seq * heads * (head / 2);
  const unsigned blocks = detail::mapBlocks(pairs);
  const double t = static_cast<double>(theta);
  if (detail::allF32(x, y))
    ropeKernel<<<blocks, detail::kMapThreads, 0, stream>>>(pairs, seq, heads, head / 2, t, inverse,
                                                           headStart, tailStart, scaling, positions,
                                                           detail::f32(x), detail::f32(y));
  else
    ropeKernel<<<blocks, detail::kMapThreads, 0, stream>>>(
        pairs, seq, heads, head / 2, t, inverse, headStart, tailStart, scaling, positions, x, y);
  return detail::launched();
}

} // namespace tessel::cuda
