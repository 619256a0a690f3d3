//===- Reduce.cu - Sums over dims -----------------------------------------===//
//
// The CPU counterpart is cpu::reduceSum (kernels/cpu/Reduce.cpp), whose order this follows to
// the bit: every output sums its terms in increasing index order in f64, in runs of
// kReduceRun terms, then the runs' sums in order, and is scaled once. An output of at most
// one run, or a call without workspace, is summed by one thread. Otherwise two launches: one
// thread per (output, run) sums its run into an f64 workspace, neighbouring threads taking
// neighbouring outputs (a bias gradient's columns: coalesced reads) and, past the outputs, the
// next run; then one thread per output adds its runs in order. A bias gradient over 16,384 rows
// is 64 runs, so 768 columns give 49,152 threads instead of 768.
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

/// Output o's offsets in x (of its first term) and in out.
__device__ inline void keptOffsets(const ReducePlan &plan, int64_t o, int64_t &xBase,
                                   int64_t &outOffset) {
  xBase = outOffset = 0;
  for (int d = plan.keptRank - 1; d >= 0; --d) {
    const int64_t i = o % plan.keptSize[d];
    o /= plan.keptSize[d];
    xBase += i * plan.keptX[d];
    outOffset += i * plan.keptOut[d];
  }
}

/// The f64 sum of terms [first, end) of the output whose first term is at xBase, in order: an
/// odometer over the summed dims, started at `first`. With `runs`, the terms are added in runs
/// of kReduceRun and the runs' sums in order (the whole contract); without, plainly (one
/// run's part of it).
template <class In>
__device__ double sumTerms(const ReducePlan &plan, In x, int64_t xBase, int64_t first,
                           int64_t end, bool runs) {
  if (plan.summedRank <= 1 && !runs) {
    // One summed dim, one stride: a plain loop the compiler unrolls, its loads in flight
    // together (the order of the additions is the same).
    const int64_t step = plan.summedRank == 1 ? plan.summedX[0] : 0;
    double sum = 0.0;
#pragma unroll 8
    for (int64_t t = first; t < end; ++t)
      sum += detail::load(x + (xBase + t * step));
    return sum;
  }
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;
  for (int64_t d = plan.summedRank - 1, rest = first; d >= 0; --d) {
    index[d] = rest % plan.summedSize[d];
    rest /= plan.summedSize[d];
    offset += index[d] * plan.summedX[d];
  }
  double total = 0.0, run = 0.0;
  int64_t inRun = 0;
  for (int64_t t = first; t < end; ++t) {
    run += detail::load(x + (xBase + offset));
    if (runs && ++inRun == kReduceRun) {
      total += run;
      run = 0.0;
      inRun = 0;
    }
    for (int d = plan.summedRank - 1; d >= 0; --d) {
      offset += plan.summedX[d];
      if (++index[d] < plan.summedSize[d])
        break;
      offset -= plan.summedSize[d] * plan.summedX[d];
      index[d] = 0;
    }
  }
  return total + run;
}

template <class Out>
__device__ inline void storeSum(Out out, int64_t outOffset, double sum, float scale,
                                bool accumulate) {
  const float scaled = static_cast<float>(sum * scale);
  detail::store(out + outOffset, accumulate ? detail::load(out + outOffset) + scaled : scaled);
}

/// One thread per output, summing all its runs.
template <class In, class Out>
__global__ void reduceKernel(ReducePlan plan, In x, float scale, bool accumulate, Out out) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < plan.outputs;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t xBase, outOffset;
    keptOffsets(plan, o, xBase, outOffset);
    storeSum(out, outOffset, sumTerms(plan, x, xBase, 0, plan.terms, true), scale, accumulate);
  }
}

/// One thread per (output, run): runSums[run * outputs + output].
template <class In>
__global__ void reduceRunsKernel(ReducePlan plan, In x, int64_t runs, double *runSums) {
  const int64_t pairs = plan.outputs * runs;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pairs;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p % plan.outputs, r = p / plan.outputs;
    int64_t xBase, outOffset;
    keptOffsets(plan, o, xBase, outOffset);
    const int64_t first = r * kReduceRun;
    const int64_t end = first + kReduceRun < plan.terms ? first + kReduceRun : plan.terms;
    runSums[p] = sumTerms(plan, x, xBase, first, end, false);
  }
}

/// One thread per output: its runs' sums in order, scaled once.
template <class Out>
__global__ void reduceFinishKernel(ReducePlan plan, int64_t runs, const double *runSums,
                                   float scale, bool accumulate, Out out) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < plan.outputs;
       o += int64_t(gridDim.x) * blockDim.x) {
    int64_t xBase, outOffset;
    keptOffsets(plan, o, xBase, outOffset);
    double total = 0.0;
    for (int64_t r = 0; r < runs; ++r)
      total += runSums[r * plan.outputs + o];
    storeSum(out, outOffset, total, scale, accumulate);
  }
}

/// Runs per output, where more than one.
int64_t runsOf(const ReducePlan &plan) {
  return plan.terms > kReduceRun ? (plan.terms + kReduceRun - 1) / kReduceRun : 0;
}

/// Splits the input's dims into kept and summed ones; false for a shape out of range.
bool planOf(const Shape &shape, const Strides &so, ReducePlan &plan) {
  if (shape.rank < 0 || shape.rank > kMaxRank)
    return false;
  int64_t xStride = 1;
  int64_t keptX[kMaxRank], keptOut[kMaxRank], keptSize[kMaxRank];
  int64_t summedX[kMaxRank], summedSize[kMaxRank];
  // Innermost first, then reversed into row-major order.
  // A dim of size 1 changes no offset; a dim that continues the inner one of its kind in x
  // (and, kept, in out) is merged into it: the same terms in the same order, walked with
  // fewer divisions (a bias gradient's rows become one summed dim with one stride).
  for (int d = shape.rank - 1; d >= 0; --d) {
    const int64_t size = shape.size[d];
    if (size <= 0)
      return false;
    if (size == 1)
      continue;
    if (so.stride[d] != 0) {
      const int k = plan.keptRank;
      plan.outputs *= size;
      if (k > 0 && keptX[k - 1] * keptSize[k - 1] == xStride &&
          keptOut[k - 1] * keptSize[k - 1] == so.stride[d])
        keptSize[k - 1] *= size;
      else {
        keptSize[k] = size;
        keptX[k] = xStride;
        keptOut[k] = so.stride[d];
        ++plan.keptRank;
      }
    } else {
      const int k = plan.summedRank;
      plan.terms *= size;
      if (k > 0 && summedX[k - 1] * summedSize[k - 1] == xStride)
        summedSize[k - 1] *= size;
      else {
        summedSize[k] = size;
        summedX[k] = xStride;
        ++plan.summedRank;
      }
    }
    xStride *= size;
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
  return true;
}

template <class In, class Out>
cudaError_t launchReduce(const ReducePlan &plan, In x, float scale, Out out, void *workspace,
                         cudaStream_t stream, bool accumulate) {
  const int64_t runs = runsOf(plan);
  if (runs == 0 || !workspace) {
    reduceKernel<<<detail::mapBlocks(plan.outputs), detail::kMapThreads, 0, stream>>>(
        plan, x, scale, accumulate, out);
    return detail::launched();
  }
  double *runSums = static_cast<double *>(workspace);
  reduceRunsKernel<<<detail::mapBlocks(plan.outputs * runs), detail::kMapThreads, 0, stream>>>(
      plan, x, runs, runSums);
  if (cudaError_t e = detail::launched(); e != cudaSuccess)
    return e;
  reduceFinishKernel<<<detail::mapBlocks(plan.outputs), detail::kMapThreads, 0, stream>>>(
      plan, runs, runSums, scale, accumulate, out);
  return detail::launched();
}

} // namespace

int64_t reduceSumWorkspaceBytes(const Shape &shape, const Strides &so) {
  ReducePlan plan;
  if (!planOf(shape, so, plan))
    return 0;
  return plan.outputs * runsOf(plan) * static_cast<int64_t>(sizeof(double));
}

cudaError_t reduceSum(const Shape &shape, ConstFloats x, const Strides &so, float scale, Floats out,
                      cudaStream_t stream, bool accumulate, void *workspace) {
  ReducePlan plan;
  if (!planOf(shape, so, plan))
    return cudaErrorInvalidValue;
  if (detail::allF32(x, out))
    return launchReduce(plan, detail::f32(x), scale, detail::f32(out), workspace, stream,
                        accumulate);
  return launchReduce(plan, x, scale, out, workspace, stream, accumulate);
}

} // namespace tessel::cuda
