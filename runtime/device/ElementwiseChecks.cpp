//===- ElementwiseChecks.cpp - Checks of elementwise, product and row kernels ===//
//
// The checks (KernelChecks.h) of the elementwise kernels (strided shapes of any rank up to
// kernels::kMaxRank, broadcasting by zero strides), the products (gemm's leading dimensions and
// batch strides) and the row kernels (softmax, top-k, the norms and the losses, whose rows
// and columns, and split columns, must fit their operands).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/KernelChecks.h"

#include "common/layout/HeadTail.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace tessel::rt {

using namespace checks;
using kernels::Shape;
using kernels::Strides;

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

bool check(KernelCall &c, const catalogue::Fill &p, args::Fill &a) {
  a.n = p.n;
  a.value = static_cast<float>(p.value);
  return c.needOut(0, a.n);
}

bool check(KernelCall &c, const catalogue::Positions &p, args::Positions &a) {
  a.n = p.n;
  return c.needOut(0, a.n);
}

bool check(KernelCall &c, const catalogue::Binary &p, args::Binary &a) {
  a.op = p.op;
  return toShape(c, p.shape, a.shape) && stridedInput(c, 0, p.shape, p.a_strides, a.a) &&
         stridedInput(c, 1, p.shape, p.b_strides, a.b) && c.needOut(0, product(p.shape));
}

template <class P> bool checkUnary(KernelCall &c, const P &p, args::Unary &a, size_t inputs) {
  a.op = p.op;
  a.n = p.n;
  if (!exponentOf(c, p.op, p.exponent, a.exponent))
    return false;
  for (size_t k = 0; k < inputs; ++k)
    if (!c.needIn(k, a.n))
      return false;
  return c.needOut(0, a.n);
}
bool check(KernelCall &c, const catalogue::Unary &p, args::Unary &a) {
  return checkUnary(c, p, a, 1);
}
bool check(KernelCall &c, const catalogue::UnaryGrad &p, args::UnaryGrad &a) {
  return checkUnary(c, p, a, 3);
}

bool check(KernelCall &c, const catalogue::Where &p, args::Where &a) {
  return toShape(c, p.shape, a.shape) && stridedInput(c, 0, p.shape, p.cond_strides, a.cond) &&
         stridedInput(c, 1, p.shape, p.a_strides, a.a) &&
         stridedInput(c, 2, p.shape, p.b_strides, a.b) && c.needOut(0, product(p.shape));
}

bool check(KernelCall &c, const catalogue::FusedElementwise &p, args::FusedElementwise &a) {
  const auto &sizes = p.shape;
  const catalogue::ElementwiseBody &body = p.body;
  if (!toShape(c, sizes, a.shape))
    return false;
  const size_t nIn = c.in.size(), rank = sizes.size();
  if (static_cast<size_t>(body.inputs) > nIn)
    return c.fail("has a body that reads input x" + std::to_string(body.inputs - 1) + " of " +
                  std::to_string(nIn) + " inputs");
  if (p.x_strides.size() != nIn * rank)
    return c.fail("has " + std::to_string(p.x_strides.size()) + " x_strides for " +
                  std::to_string(nIn) + " inputs of " + std::to_string(rank) + " dims");
  if (p.outputs.size() != c.out.size())
    return c.fail("names " + std::to_string(p.outputs.size()) + " steps in 'outputs' for " +
                  std::to_string(c.out.size()) + " outputs");
  for (int64_t s : p.outputs) {
    if (s < 0 || s >= static_cast<int64_t>(body.steps.size()))
      return c.fail("has output step " + std::to_string(s) + "; the body has " +
                    std::to_string(body.steps.size()) + " steps");
    a.outSteps.push_back(static_cast<int32_t>(s));
  }
  a.strides.assign(nIn, Strides{});
  for (size_t k = 0; k < nIn; ++k) {
    std::vector<int64_t> sk(p.x_strides.begin() + k * rank, p.x_strides.begin() + (k + 1) * rank);
    if (!stridedInput(c, k, sizes, sk, a.strides[k]))
      return false;
  }
  for (size_t o = 0; o < c.out.size(); ++o)
    if (!c.needOut(o, product(sizes)))
      return false;
  // The body's kinds and operations are the catalogue's (kernels/KernelTypes.h); its registers
  // become value numbers.
  static_assert(static_cast<int>(catalogue::BodyStep::Kind::Where) ==
                static_cast<int>(kernels::FusedStep::Kind::Where));
  static_assert(static_cast<int>(catalogue::BodyStep::Kind::UnaryGrad) ==
                static_cast<int>(kernels::FusedStep::Kind::UnaryGrad));
  for (const catalogue::BodyStep &b : body.steps) {
    kernels::FusedStep s;
    s.kind = static_cast<kernels::FusedStep::Kind>(b.kind);
    s.unary = b.unary;
    s.binary = b.binary;
    for (int k = 0; k < 3; ++k)
      s.args[k] = b.args[k].input ? b.args[k].index : static_cast<int32_t>(nIn) + b.args[k].index;
    // As `fill` and `unary` take them: the f64 of the plan rounded to float.
    s.value = static_cast<float>(b.value);
    a.steps.push_back(s);
  }
  if (p.rounded && !p.rounded->empty()) {
    if (!p.narrow)
      return c.fail("rounds steps but names no 'narrow' type to round them to");
    for (int64_t step : *p.rounded) {
      if (step < 0 || step >= static_cast<int64_t>(a.steps.size()))
        return c.fail("rounds step " + std::to_string(step) + "; the body has " +
                      std::to_string(a.steps.size()) + " steps");
      a.steps[step].rounded = true;
      a.steps[step].narrow =
          *p.narrow == catalogue::Narrow::BF16 ? planfile::DType::BF16 : planfile::DType::F16;
    }
  }
  return true;
}

/// Dropout draws each element's mask from its index in the whole tensor of the whole step
/// batch: `shape` is this rank's block of one micro-batch, `groups` names per dim (separated by
/// commas) the group splitting it ("" for none), and micro-batch `micro` of `micro_batches`
/// covers its part of dim `batch_dim` (-1: the tensor has no batch dim). So every layout and
/// every accumulation drops the same elements as one rank with one micro-batch.
bool check(KernelCall &c, const catalogue::Dropout &p, args::Dropout &a) {
  const std::vector<int64_t> &shape = p.shape;
  a.shape = shape;
  a.rate = static_cast<float>(p.rate);
  a.mask = p.mask;
  a.batchDim = p.batch_dim;
  a.microBatches = p.micro_batches;
  std::vector<std::string> names(1);
  for (char ch : p.groups) {
    if (ch == ',')
      names.emplace_back();
    else
      names.back().push_back(ch);
  }
  if (shape.empty() && names.size() == 1 && names[0].empty())
    names.clear();
  if (names.size() != shape.size())
    return c.fail("groups names " + std::to_string(names.size()) + " dims, shape " +
                  std::to_string(shape.size()));
  if (shape.size() > static_cast<size_t>(kernels::kMaxRank))
    return c.fail("has rank " + std::to_string(shape.size()) + "; at most " +
                  std::to_string(kernels::kMaxRank) + " is supported");
  if (a.batchDim < -1 || a.batchDim >= static_cast<int64_t>(shape.size()) || a.microBatches < 1)
    return c.fail("batch_dim must name a dim (or be -1) and micro_batches be positive");
  a.offset.assign(shape.size(), 0);
  a.tail.assign(shape.size(), -1);
  a.whole = shape;
  a.n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0)
      return c.fail("shape sizes must be positive");
    a.n *= shape[d];
    if (names[d].empty())
      continue;
    const int64_t index = c.groupIndex(names[d]), size = c.groupSize(names[d]);
    if (!c.error.empty())
      return false;
    a.offset[d] = index * shape[d];
    a.whole[d] = size * shape[d];
    if (headtail::isHeadTail(names[d]) && size > 1) {
      if (shape[d] % 2 != 0)
        return c.fail("splits dim " + std::to_string(d) + " head-tail into an odd block");
      a.offset[d] = headtail::chunkOf(index, size, 0) * (shape[d] / 2);
      a.tail[d] = headtail::chunkOf(index, size, 1) * (shape[d] / 2);
    }
  }
  if (!c.needIn(0, a.n) || !c.needOut(0, a.n))
    return false;
  if (!(p.rate >= 0 && p.rate < 1))
    return c.fail("rate must lie in [0, 1)");
  return true;
}

bool check(KernelCall &c, const catalogue::Copy &p, args::Copy &a) {
  a.xOffset = p.x_offset.value_or(0);
  if (a.xOffset < 0)
    return c.fail("has a negative x_offset");
  return toShape(c, p.shape, a.shape) && toStrides(c, p.x_strides, p.shape.size(), a.x) &&
         c.needIn(0, a.xOffset + reach(p.shape, p.x_strides)) && c.needOut(0, product(p.shape));
}

bool check(KernelCall &c, const catalogue::Reduce &p, args::Reduce &a) {
  a.yElements = p.y_elements;
  a.scale = static_cast<float>(p.scale);
  a.accumulate = p.accumulate.value_or(false);
  return toShape(c, p.shape, a.shape) && toStrides(c, p.y_strides, p.shape.size(), a.y) &&
         c.needIn(0, product(p.shape)) && c.needOut(0, a.yElements) &&
         c.needOut(0, reach(p.shape, p.y_strides));
}

bool check(KernelCall &c, const catalogue::Accumulate &p, args::Accumulate &a) {
  a.n = p.n;
  return c.needIn(0, a.n) && c.needOut(0, a.n);
}

bool check(KernelCall &c, const catalogue::Pack &p, args::Pack &a) {
  a.ways = p.ways;
  a.outers = p.outers;
  a.chunks = p.chunks;
  if (c.in.empty() || a.outers.size() != c.in.size() || a.chunks.size() != c.in.size())
    return c.fail("needs one 'outers' and one 'chunks' entry per input, and an input");
  if (a.ways <= 0)
    return c.fail("needs a positive 'ways'");
  int64_t part = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    if (a.outers[k] <= 0 || a.chunks[k] <= 0)
      return c.fail("has a non-positive outer or chunk size");
    if (!c.needIn(k, a.outers[k] * a.ways * a.chunks[k]))
      return false;
    part += a.outers[k] * a.chunks[k];
  }
  return c.needOut(0, a.ways * part);
}

bool check(KernelCall &c, const catalogue::ShardSlice &p, args::ShardSlice &a) {
  const int64_t outer = p.outer, chunk = p.chunk;
  const CommGroup *g = c.group(p.group);
  if (!g)
    return false;
  if (outer <= 0 || chunk <= 0)
    return c.fail("has a non-positive outer or chunk size");
  const int64_t ways = g->size();
  if (!c.needIn(0, outer * ways * chunk) || !c.needOut(0, outer * chunk))
    return false;
  if (headtail::isHeadTail(p.group) && ways > 1) {
    // A head-tail dim: y[o, h, :] = chunk headtail::chunkOf(me, ways, h) of x[o], for the
    // head (h = 0) and the tail (h = 1) halves of this rank's block.
    if (chunk % 2 != 0)
      return c.fail("splits a dim head-tail but its chunk of " + std::to_string(chunk) +
                    " elements is odd");
    const int64_t half = chunk / 2, me = g->index;
    const int64_t head = headtail::chunkOf(me, ways, 0), tail = headtail::chunkOf(me, ways, 1);
    a.shape.rank = 3;
    a.shape.size[0] = outer;
    a.shape.size[1] = 2;
    a.shape.size[2] = half;
    a.x.stride[0] = ways * chunk;
    a.x.stride[1] = (tail - head) * half;
    a.x.stride[2] = 1;
    a.offset = head * half;
    return true;
  }
  // y[o, :] = x[o, me, :]: a strided copy of [outer, chunk] starting at block `me`.
  a.shape.rank = 2;
  a.shape.size[0] = outer;
  a.shape.size[1] = chunk;
  a.x.stride[0] = ways * chunk;
  a.x.stride[1] = 1;
  a.offset = static_cast<int64_t>(g->index) * chunk;
  return true;
}

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

bool check(KernelCall &c, const catalogue::Gemm &p, args::Gemm &out) {
  const auto &batch = p.batch_shape, &sa = p.a_batch_strides, &sb = p.b_batch_strides,
             &sc = p.c_batch_strides;
  kernels::GemmArgs &g = out.args;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.transA = p.trans_a != 0;
  g.transB = p.trans_b != 0;
  g.lda = p.lda;
  g.ldb = p.ldb;
  g.ldc = p.ldc;
  g.beta = p.accumulate.value_or(false) ? 1.0f : 0.0f;
  if (sa.size() != batch.size() || sb.size() != batch.size() || sc.size() != batch.size())
    return c.fail("has batch strides that do not match its batch shape");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return c.fail("has a non-positive matrix size");
  for (int64_t size : batch)
    if (size <= 0)
      return c.fail("has a non-positive batch size");
  // The extent of one matrix, then of all batches.
  const int64_t aRows = g.transA ? g.k : g.m, aCols = g.transA ? g.m : g.k;
  const int64_t bRows = g.transB ? g.n : g.k, bCols = g.transB ? g.k : g.n;
  if (g.lda < aCols || g.ldb < bCols || g.ldc < g.n)
    return c.fail("has a leading dimension smaller than its matrix");
  if (!c.needIn(0, reach(batch, sa) - 1 + (aRows - 1) * g.lda + aCols) ||
      !c.needIn(1, reach(batch, sb) - 1 + (bRows - 1) * g.ldb + bCols) ||
      !c.needOut(0, reach(batch, sc) - 1 + (g.m - 1) * g.ldc + g.n))
    return false;

  // All batch dims but the last are looped by the launch; the last is the kernel's strided
  // batch.
  const size_t outer = batch.empty() ? 0 : batch.size() - 1;
  g.batch = batch.empty() ? 1 : batch.back();
  g.strideA = batch.empty() ? 0 : sa.back();
  g.strideB = batch.empty() ? 0 : sb.back();
  g.strideC = batch.empty() ? 0 : sc.back();
  int64_t outerCount = 1;
  for (size_t d = 0; d < outer; ++d)
    outerCount *= batch[d];
  for (int64_t o = 0; o < outerCount; ++o) {
    std::array<int64_t, 3> off = {0, 0, 0};
    int64_t rest = o;
    for (int d = static_cast<int>(outer) - 1; d >= 0; --d) {
      const int64_t i = rest % batch[d];
      rest /= batch[d];
      off[0] += i * sa[d];
      off[1] += i * sb[d];
      off[2] += i * sc[d];
    }
    out.offsets.push_back(off);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Rows: softmax, top-k, norms, losses
//===----------------------------------------------------------------------===//

template <class P, class A> bool checkRowsInOut(KernelCall &c, const P &p, A &a, size_t inputs) {
  if (!rowsCols(c, p, a))
    return false;
  for (size_t k = 0; k < inputs; ++k)
    if (!c.needIn(k, a.rows * a.cols))
      return false;
  return c.needOut(0, a.rows * a.cols);
}
bool check(KernelCall &c, const catalogue::Softmax &p, args::Softmax &a) {
  return checkRowsInOut(c, p, a, 1);
}
bool check(KernelCall &c, const catalogue::SoftmaxGrad &p, args::SoftmaxGrad &a) {
  return checkRowsInOut(c, p, a, 2);
}

bool check(KernelCall &c, const catalogue::TopKMask &p, args::TopKMask &a) {
  a.k = p.k;
  if (!checkRowsInOut(c, p, a, 1))
    return false;
  if (a.k < 1 || a.k > a.cols)
    return c.fail("chooses k = " + std::to_string(a.k) + " of " + std::to_string(a.cols) +
                  " columns");
  return true;
}

/// A norm: x [rows, cols] and its gains (and LayerNorm's bias) of cols; the gradients take dy
/// as input 2 and write the gains' gradients after dx.
template <class P> bool checkNorm(KernelCall &c, const P &p, args::Norm &a, bool bias, bool grad) {
  a.eps = static_cast<float>(p.eps);
  if (!rowsCols(c, p, a))
    return false;
  const int64_t n = a.rows * a.cols;
  if (!c.needIn(0, n) || !c.needIn(1, a.cols) || !c.needOut(0, n))
    return false;
  if (!grad)
    return !bias || c.needIn(2, a.cols);
  return c.needIn(2, n) && c.needOut(1, a.cols) && (!bias || c.needOut(2, a.cols));
}
bool check(KernelCall &c, const catalogue::LayerNorm &p, args::LayerNorm &a) {
  return checkNorm(c, p, a, true, false);
}
bool check(KernelCall &c, const catalogue::LayerNormGrad &p, args::LayerNormGrad &a) {
  return checkNorm(c, p, a, true, true);
}
bool check(KernelCall &c, const catalogue::RmsNorm &p, args::RmsNorm &a) {
  return checkNorm(c, p, a, false, false);
}
bool check(KernelCall &c, const catalogue::RmsNormGrad &p, args::RmsNormGrad &a) {
  return checkNorm(c, p, a, false, true);
}

bool check(KernelCall &c, const catalogue::CrossEntropy &p, args::CrossEntropy &a) {
  return rowsCols(c, p, a) && lossScale(c, p, a) && c.needIn(0, a.rows * a.cols) &&
         c.needIn(1, a.rows) && c.needOut(0, 1);
}
bool check(KernelCall &c, const catalogue::CrossEntropyGrad &p, args::CrossEntropyGrad &a) {
  return rowsCols(c, p, a) && lossScale(c, p, a) && c.needIn(0, a.rows * a.cols) &&
         c.needIn(1, a.rows) && c.needIn(2, 1) && c.needOut(0, a.rows * a.cols);
}

bool check(KernelCall &c, const catalogue::CeMax &p, args::CeMax &a) {
  return rowsCols(c, p, a) && c.needIn(0, a.rows * a.cols) && c.needOut(0, a.rows);
}

bool check(KernelCall &c, const catalogue::CeSums &p, args::CeSums &a) {
  return rowsCols(c, p, a) && blockOfDim(c, &p.col_group, a.cols, a.first, a.classes) &&
         c.needIn(0, a.rows * a.cols) && c.needIn(1, a.rows) && c.needIn(2, a.rows) &&
         c.needOut(0, a.rows) && c.needOut(1, a.rows);
}

bool check(KernelCall &c, const catalogue::CeLoss &p, args::CeLoss &a) {
  a.rows = p.rows;
  a.scale = p.scale;
  if (a.rows <= 0 || !std::isfinite(a.scale))
    return c.fail("needs positive rows and a finite scale");
  return c.needIn(0, a.rows) && c.needIn(1, a.rows) && c.needIn(2, a.rows) && c.needOut(0, 1);
}

bool check(KernelCall &c, const catalogue::CeGrad &p, args::CeGrad &a) {
  a.scale = p.scale;
  if (!rowsCols(c, p, a))
    return false;
  if (!std::isfinite(a.scale))
    return c.fail("has a non-finite scale");
  return blockOfDim(c, &p.col_group, a.cols, a.first, a.classes) && c.needIn(0, a.rows * a.cols) &&
         c.needIn(1, a.rows) && c.needIn(2, a.rows) && c.needIn(3, a.rows) && c.needIn(4, 1) &&
         c.needOut(0, a.rows * a.cols);
}

} // namespace tessel::rt
