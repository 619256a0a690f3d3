//===- FusedElementwise.cpp - A chain of elementwise ops in one pass ------===//
//
// The element range is cut into tiles of kTile elements. For each tile, every input is read
// once (pointed at where it is dense in the outputs' order, else gathered into a small
// buffer), then every step runs over the tile into a buffer of its own (or straight into the
// output that takes it). A tile's buffers stay in the L1/L2 cache, so a chain of k ops reads
// its inputs and writes its outputs once instead of k times. The steps are the unfused
// kernels' own runs (ElementwiseRuns.h), which compute an element alike wherever it falls in
// a run, so the results are bit-identical to unfused execution for any tiling and thread count;
// in a mixed-precision plan a step whose unfused kernel would store its value 16-bit rounds it
// so, before any later step reads it.
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "kernels/cpu/ElementwiseRuns.h"
#include "kernels/cpu/Loops.h"

#include <algorithm>
#include <cstring>

namespace tessel::cpu {

namespace {

/// Elements per tile: a multiple of the vector width, and small enough that a tile of every
/// value of a long body stays in cache.
constexpr int64_t kTile = 1024;

/// How one input is read: its shape collapsed with its strides, and whether it is dense in
/// the outputs' order (then a tile is a pointer into it).
struct InputWalk {
  detail::Collapsed<1> c;
  bool dense = false;
};

/// Copies elements [begin, begin + n) (in the outputs' row-major order) of an input into dst.
void gather(const InputWalk &w, const float *x, int64_t begin, int64_t n, float *dst) {
  const detail::Collapsed<1> &c = w.c;
  const int inner = c.rank - 1;
  const int64_t innerSize = c.size[inner], innerStride = c.stride[0][inner];
  int64_t index[kMaxRank] = {}, offset = 0, done = 0;
  int64_t rest = begin / innerSize, j = begin % innerSize;
  for (int d = inner - 1; d >= 0; --d) {
    index[d] = rest % c.size[d];
    rest /= c.size[d];
    offset += index[d] * c.stride[0][d];
  }
  while (done < n) {
    const int64_t length = std::min(innerSize - j, n - done);
    const float *src = x + offset + j * innerStride;
    if (innerStride == 1)
      std::memcpy(dst + done, src, static_cast<size_t>(length) * sizeof(float));
    else if (innerStride == 0)
      std::fill(dst + done, dst + done + length, *src);
    else
      for (int64_t i = 0; i < length; ++i)
        dst[done + i] = src[i * innerStride];
    done += length;
    j = 0;
    for (int d = inner - 1; d >= 0; --d) {
      offset += c.stride[0][d];
      if (++index[d] < c.size[d])
        break;
      offset -= c.size[d] * c.stride[0][d];
      index[d] = 0;
    }
  }
}

} // namespace

void fusedElementwise(const Shape &shape, const std::vector<FusedStep> &steps,
                      const std::vector<const float *> &inputs,
                      const std::vector<Strides> &inStrides, const std::vector<float *> &outputs,
                      const std::vector<int32_t> &outSteps) {
  const int64_t total = shape.numElements();
  if (total == 0)
    return;
  const size_t nIn = inputs.size(), nSteps = steps.size();
  std::vector<InputWalk> walks(nIn);
  for (size_t k = 0; k < nIn; ++k) {
    const Strides *ops[1] = {&inStrides[k]};
    walks[k].c = detail::collapse(shape, ops);
    walks[k].dense = walks[k].c.rank == 1 && walks[k].c.stride[0][0] == 1;
  }
  // A step an output takes is computed straight into the first such output.
  std::vector<int> writes(nSteps, -1);
  for (size_t o = 0; o < outSteps.size(); ++o)
    if (writes[outSteps[o]] < 0)
      writes[outSteps[o]] = static_cast<int>(o);

  const int64_t tiles = (total + kTile - 1) / kTile;
#pragma omp parallel if (total >= detail::kParallelGrain)
  {
    std::vector<float> scratch((nIn + nSteps) * kTile);
    std::vector<const float *> value(nIn + nSteps);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t begin = t * kTile, n = std::min(kTile, total - begin);
      for (size_t k = 0; k < nIn; ++k) {
        if (walks[k].dense) {
          value[k] = inputs[k] + begin;
          continue;
        }
        float *buf = scratch.data() + k * kTile;
        gather(walks[k], inputs[k], begin, n, buf);
        value[k] = buf;
      }
      for (size_t j = 0; j < nSteps; ++j) {
        const FusedStep &s = steps[j];
        float *dst =
            writes[j] >= 0 ? outputs[writes[j]] + begin : scratch.data() + (nIn + j) * kTile;
        const float *a = value[s.args[0]], *b = value[s.args[1]], *c = value[s.args[2]];
        switch (s.kind) {
        case FusedStep::Kind::Const:
          std::fill(dst, dst + n, s.value);
          break;
        case FusedStep::Kind::Unary:
          detail::unaryRun(s.unary, n, a, dst, s.value);
          break;
        case FusedStep::Kind::UnaryGrad:
          detail::unaryGradRun(s.unary, n, a, b, c, dst, s.value);
          break;
        case FusedStep::Kind::Binary:
          detail::binaryRun(s.binary, n, a, b, dst);
          break;
        case FusedStep::Kind::Where:
          detail::selectRun(n, a, b, c, dst);
          break;
        }
        if (s.rounded)
          detail::roundRun(s.narrow, n, dst);
        value[nIn + j] = dst;
      }
      for (size_t o = 0; o < outSteps.size(); ++o)
        if (writes[outSteps[o]] != static_cast<int>(o))
          std::memcpy(outputs[o] + begin, value[nIn + outSteps[o]],
                      static_cast<size_t>(n) * sizeof(float));
    }
  }
}

} // namespace tessel::cpu
