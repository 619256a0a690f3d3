//===- Reduce.cpp - Sums over dims ----------------------------------------===//
//
// Every output element is owned by one thread and sums its inputs in increasing index order in
// double, in runs of kReduceRun terms (CpuKernels.h), so the result does not depend on the
// thread count, and the CUDA kernel, which sums an output's runs in parallel, gives its bits.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/Loops.h"

#include <algorithm>

namespace tessel::cpu {

using detail::collapse;
using detail::Collapsed;
using detail::kParallelGrain;

namespace {

/// Columns one work item sums at once when the innermost dim is kept.
constexpr int64_t kColumnBlock = 64;

/// The collapsed shape split into kept dims (those with an output stride) and reduced dims.
struct ReducePlan {
  int keptRank = 0, reducedRank = 0;
  int64_t keptSize[kMaxRank] = {}, keptX[kMaxRank] = {}, keptOut[kMaxRank] = {};
  int64_t reducedSize[kMaxRank] = {}, reducedX[kMaxRank] = {};
  int64_t reducedCount = 1;

  /// The offsets in x and out of kept index `index` (row-major over the kept dims, the last
  /// `skipLast` kept dims excluded).
  void keptOffsets(int64_t index, int skipLast, int64_t &x, int64_t &out) const {
    x = out = 0;
    for (int d = keptRank - 1 - skipLast; d >= 0; --d) {
      const int64_t i = index % keptSize[d];
      index /= keptSize[d];
      x += i * keptX[d];
      out += i * keptOut[d];
    }
  }

  /// Calls f(offset in x) for every reduced index, in increasing order: the innermost reduced
  /// dim as a plain loop, the outer ones by an odometer.
  template <class F> void forEachReduced(F f) const {
    if (reducedRank == 0)
      return f(int64_t(0));
    const int inner = reducedRank - 1;
    const int64_t innerSize = reducedSize[inner], innerStride = reducedX[inner];
    int64_t index[kMaxRank] = {};
    int64_t offset = 0;
    for (int64_t r = 0; r < reducedCount; r += innerSize) {
      for (int64_t t = 0; t < innerSize; ++t)
        f(offset + t * innerStride);
      for (int d = inner - 1; d >= 0; --d) {
        offset += reducedX[d];
        if (++index[d] < reducedSize[d])
          break;
        offset -= reducedSize[d] * reducedX[d];
        index[d] = 0;
      }
    }
  }
};

} // namespace

void reduceSum(const Shape &shape, const float *x, const Strides &so, int64_t outElements,
               float scale, float *out, bool accumulate) {
  if (shape.numElements() == 0) {
    if (!accumulate)
      std::fill(out, out + outElements, 0.0f);
    return;
  }
  const Strides *ops[1] = {&so};
  const Collapsed<1> c = collapse(shape, ops);
  ReducePlan plan;
  int64_t xStride = 1;
  bool lastKept = false;
  for (int d = c.rank - 1; d >= 0; --d) {
    const bool kept = c.stride[0][d] != 0;
    if (d == c.rank - 1)
      lastKept = kept;
    // Dims are collected innermost first, then reversed below.
    if (kept) {
      plan.keptSize[plan.keptRank] = c.size[d];
      plan.keptX[plan.keptRank] = xStride;
      plan.keptOut[plan.keptRank++] = c.stride[0][d];
    } else {
      plan.reducedSize[plan.reducedRank] = c.size[d];
      plan.reducedX[plan.reducedRank++] = xStride;
      plan.reducedCount *= c.size[d];
    }
    xStride *= c.size[d];
  }
  std::reverse(plan.keptSize, plan.keptSize + plan.keptRank);
  std::reverse(plan.keptX, plan.keptX + plan.keptRank);
  std::reverse(plan.keptOut, plan.keptOut + plan.keptRank);
  std::reverse(plan.reducedSize, plan.reducedSize + plan.reducedRank);
  std::reverse(plan.reducedX, plan.reducedX + plan.reducedRank);
  const int64_t total = shape.numElements();

  if (lastKept) {
    // Column sums: each work item owns a block of the contiguous innermost kept dim and adds
    // the input rows into it in order.
    const int64_t columns = plan.keptSize[plan.keptRank - 1];
    const int64_t outStep = plan.keptOut[plan.keptRank - 1];
    const int64_t blocks = (columns + kColumnBlock - 1) / kColumnBlock;
    const int64_t outer = total / (columns * plan.reducedCount);
    const int64_t items = outer * blocks;
#pragma omp parallel for schedule(static) if (total >= kParallelGrain && items > 1)
    for (int64_t item = 0; item < items; ++item) {
      int64_t xBase, outBase;
      plan.keptOffsets(item / blocks, 1, xBase, outBase);
      const int64_t first = (item % blocks) * kColumnBlock;
      const int64_t width = std::min(kColumnBlock, columns - first);
      const float *xb = x + xBase + first;
      // The sums stay in L1 rather than registers: a wide block keeps each row's reads
      // contiguous, which matters more when the rows stream in from L3.
      double sums[kColumnBlock] = {}, runs[kColumnBlock] = {};
      int64_t inRun = 0;
      plan.forEachReduced([&](int64_t offset) {
        const float *row = xb + offset;
        for (int64_t j = 0; j < width; ++j)
          runs[j] += row[j];
        if (++inRun < kReduceRun)
          return;
        for (int64_t j = 0; j < width; ++j) {
          sums[j] += runs[j];
          runs[j] = 0.0;
        }
        inRun = 0;
      });
      float *ob = out + outBase + first * outStep;
      for (int64_t j = 0; j < width; ++j) {
        const float sum = static_cast<float>((sums[j] + runs[j]) * scale);
        ob[j * outStep] = accumulate ? ob[j * outStep] + sum : sum;
      }
    }
    return;
  }

  // Row sums: the innermost dim is reduced and contiguous, so each output sums runs of it.
  const int64_t run = plan.reducedSize[plan.reducedRank - 1];
  ReducePlan outerPlan = plan;
  outerPlan.reducedRank -= 1;
  outerPlan.reducedCount /= run;
  const int64_t outputs = total / plan.reducedCount;
#pragma omp parallel for schedule(static) if (total >= kParallelGrain && outputs > 1)
  for (int64_t o = 0; o < outputs; ++o) {
    int64_t xBase, outBase;
    plan.keptOffsets(o, 0, xBase, outBase);
    double total = 0.0, acc = 0.0;
    int64_t inRun = 0;
    const float *xb = x + xBase;
    outerPlan.forEachReduced([&](int64_t offset) {
      const float *row = xb + offset;
      // The row's terms, split where a run of kReduceRun ends.
      for (int64_t j = 0; j < run;) {
        const int64_t end = std::min(run, j + (kReduceRun - inRun));
        inRun += end - j;
        for (; j < end; ++j)
          acc += row[j];
        if (inRun == kReduceRun) {
          total += acc;
          acc = 0.0;
          inRun = 0;
        }
      }
    });
    const float sum = static_cast<float>((total + acc) * scale);
    out[outBase] = accumulate ? out[outBase] + sum : sum;
  }
}

double sumOfSquares(int64_t n, const float *x) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

} // namespace tessel::cpu
