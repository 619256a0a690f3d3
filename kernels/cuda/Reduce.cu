//===- Reduce.cu - Sums over dims -----------------------------------------===//
//
// The CPU counterpart is cpu::reduceSum (kernels/cpu/Reduce.cpp): every output element sums
// its inputs in increasing index order in f64 and is scaled once. Here one thread owns one
// output element and adds in the same order and precision, so the sums are the CPU's bits.
// Where the innermost dim is kept, neighbouring threads read neighbouring inputs; where it is
// summed each thread reads a contiguous run. (Simple first: a wide sum over few outputs, a
// bias gradient's, runs on few threads.)
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/Common.cuh"

namespace tessel::cuda {

namespace {

/// The input's dims split into the kept ones (an output stride) and the summed ones, each
/// with its stride in the dense input; row-major order within each.
struct ReducePlan {
  int keptRank = 0, summedRank = 0;
  int64_t keptSize[kMaxRank] = {}, keptX[kMaxRank] = {}, keptOut[kMaxRank] = {};
  int64_t summedSize[kMaxRank] = {}, summedX[kMaxRank] = {};
  int64_t outputs = 1, terms = 1;
};

template <class In, class Out>
__global__ void reduceKernel(ReducePlan plan, In x, float scale, bool accumulate, Out out) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < plan.outputs;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = o, xBase = 0, outOffset = 0;
    for (int d = plan.keptRank - 1; d >= 0; --d) {
      const int64_t i = rest % plan.keptSize[d];
      rest /= plan.keptSize[d];
      xBase += i * plan.keptX[d];
      outOffset += i * plan.keptOut[d];
    }
    // The summed indices in increasing order: an odometer over the summed dims.
    int64_t index[kMaxRank] = {};
    int64_t offset = 0;
    double sum = 0.0;
    for (int64_t t = 0; t < plan.terms; ++t) {
      sum += detail::load(x + (xBase + offset));
      for (int d = plan.summedRank - 1; d >= 0; --d) {
        offset += plan.summedX[d];
        if (++index[d] < plan.summedSize[d])
          break;
        offset -= plan.summedSize[d] * plan.summedX[d];
        index[d] = 0;
      }
    }
    const float scaled = static_cast<float>(sum * scale);
    detail::store(out + outOffset, accumulate ? detail::load(out + outOffset) + scaled : scaled);
  }
}

} // namespace

cudaError_t reduceSum(const Shape &shape, ConstFloats x, const Strides &so, float scale, Floats out,
                      cudaStream_t stream, bool accumulate) {
  if (shape.rank < 0 || shape.rank > kMaxRank)
    return cudaErrorInvalidValue;
  ReducePlan plan;
  int64_t xStride = 1;
  int64_t keptX[kMaxRank], keptOut[kMaxRank], keptSize[kMaxRank];
  int64_t summedX[kMaxRank], summedSize[kMaxRank];
  // Innermost first, then reversed into row-major order.
  for (int d = shape.rank - 1; d >= 0; --d) {
    if (shape.size[d] <= 0)
      return cudaErrorInvalidValue;
    if (so.stride[d] != 0) {
      keptSize[plan.keptRank] = shape.size[d];
      keptX[plan.keptRank] = xStride;
      keptOut[plan.keptRank++] = so.stride[d];
      plan.outputs *= shape.size[d];
    } else {
      summedSize[plan.summedRank] = shape.size[d];
      summedX[plan.summedRank++] = xStride;
      plan.terms *= shape.size[d];
    }
    xStride *= shape.size[d];
  }
  for (int d = 0; d < plan.keptRank; ++d) {
    plan.keptSize[d] = keptSize[plan.keptRank - 1 - d];
    plan.keptX[d] = keptX[plan.keptRank - 1 - d];
    plan.keptOut[d] = keptOut[plan.keptRank - 1 - d];
  }
  for (int d = 0; d < plan.summedRank; ++d) {
    plan.summedSize[d] = summedSize[plan.summedRank - 1 - d];
    plan.summedX[d] = summedX[plan.summedRank - 1 - d];
  }
  const unsigned blocks = detail::mapBlocks(plan.outputs);
  if (detail::allF32(x, out))
    reduceKernel<<<blocks, detail::kMapThreads, 0, stream>>>(plan, detail::f32(x), scale,
                                                             accumulate, detail::f32(out));
  else
    reduceKernel<<<blocks, detail::kMapThreads, 0, stream>>>(plan, x, scale, accumulate, out);
  return detail::launched();
}

} // namespace tessel::cuda
