//===- KernelChecks.cpp - Each compute kernel's one check -----------------===//
//
// checkKernelCall for the compute and control kernels (the collectives' checks are in
// CollectiveCalls.cpp): each derives its kernel's arguments (KernelArgs.h) from the decoded
// parameters, refusing, with a reason, sizes that are not positive, strides and ranks the
// kernels do not take, groups the plan lacks and operands too small for what the kernel would
// read or write. Every device runs the calls these accept.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/KernelArgs.h"

#include "common/HeadTail.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace tessel::rt {

namespace {

using kernels::Shape;
using kernels::Strides;

/// The product of `v`'s entries (1 for none).
int64_t product(const std::vector<int64_t> &v) {
  int64_t n = 1;
  for (int64_t x : v)
    n *= x;
  return n;
}

/// The number of elements a strided view of `shape` reaches: one past its largest offset.
int64_t reach(const std::vector<int64_t> &shape, const std::vector<int64_t> &strides) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    last += (shape[i] - 1) * strides[i];
  return last + 1;
}

/// `sizes` as a kernel Shape; false beyond kMaxRank dims or for a size that is not positive.
bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, Shape &shape) {
  if (sizes.size() > static_cast<size_t>(kernels::kMaxRank))
    return c.fail("has rank " + std::to_string(sizes.size()) + "; at most " +
                  std::to_string(kernels::kMaxRank) + " is supported");
  shape.rank = static_cast<int>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0)
      return c.fail("has a non-positive size");
    shape.size[i] = sizes[i];
  }
  return true;
}

/// `in` as one operand's Strides over `rank` dims; false for another count or a negative one.
bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, Strides &out) {
  if (in.size() != rank)
    return c.fail("has " + std::to_string(in.size()) + " strides for " + std::to_string(rank) +
                  " dims");
  for (size_t i = 0; i < rank; ++i) {
    if (in[i] < 0)
      return c.fail("has a negative stride");
    out.stride[i] = in[i];
  }
  return true;
}

/// A shape and an operand's strides over it, which must reach no further than input `k`.
bool stridedInput(KernelCall &c, size_t k, const std::vector<int64_t> &sizes,
                  const std::vector<int64_t> &strides, Strides &out) {
  return toStrides(c, strides, sizes.size(), out) && c.needIn(k, reach(sizes, strides));
}

/// The `rows` and `cols` of a row-wise kernel, which must be positive.
template <class P> bool rowsCols(KernelCall &c, const P &p, args::Rows &a) {
  a.rows = p.rows;
  a.cols = p.cols;
  if (a.rows <= 0 || a.cols <= 0)
    return c.fail("has non-positive rows or cols");
  return true;
}

/// Where this rank's block of a dim split over group `name` lies: [first, first + size) of
/// `whole`. Without a group (null) the rank holds the whole dim.
bool blockOfDim(KernelCall &c, const std::string *name, int64_t size, int64_t &first,
                int64_t &whole) {
  first = 0;
  whole = size;
  if (!name)
    return true;
  const CommGroup *g = c.group(*name);
  if (!g)
    return false;
  first = static_cast<int64_t>(g->index) * size;
  whole = size * g->size();
  return true;
}

/// pow's exponent, which it requires; 0 for the functions that have none.
bool exponentOf(KernelCall &c, catalogue::UnaryOp op, const std::optional<double> &exponent,
                float &out) {
  out = static_cast<float>(exponent.value_or(0.0));
  if (op == catalogue::UnaryOp::Pow && !exponent)
    return c.fail("pow needs an exponent");
  return true;
}

/// The optional `scale` of a loss: absent, the loss is the mean over rows.
template <class P> bool lossScale(KernelCall &c, const P &p, args::CrossEntropy &a) {
  a.scaled = p.scale.has_value();
  a.scale = p.scale.value_or(0.0);
  if (a.scaled && !std::isfinite(a.scale))
    return c.fail("has a non-finite scale");
  return true;
}

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
          *p.narrow == catalogue::Narrow::BF16 ? kernels::Half16::BF16 : kernels::Half16::F16;
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
  return blockOfDim(c, &p.col_group, a.cols, a.first, a.classes) &&
         c.needIn(0, a.rows * a.cols) && c.needIn(1, a.rows) && c.needIn(2, a.rows) &&
         c.needIn(3, a.rows) && c.needIn(4, 1) && c.needOut(0, a.rows * a.cols);
}

//===----------------------------------------------------------------------===//
// Attention, positions, embeddings
//===----------------------------------------------------------------------===//

template <class P> bool attentionArgsOf(KernelCall &c, const P &p, kernels::AttentionArgs &a) {
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.kvSeq = p.kv_seq;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.causal = p.causal != 0;
  a.scale = static_cast<float>(p.scale);
  a.window = p.window.value_or(0);
  // Under a head group this rank holds a block of the query heads and every kv head.
  int64_t wholeHeads = a.heads;
  if (!blockOfDim(c, p.head_group ? &*p.head_group : nullptr, a.heads, a.firstHead, wholeHeads))
    return false;
  if (a.window < 0 || (a.window > 0 && !a.causal))
    return c.fail("has a sliding window that is negative or without the causal mask");
  // Under a sequence group the queries are this rank's head and tail chunks of the keys'
  // whole sequence.
  int64_t wholeSeq = a.seq;
  if (p.seq_group) {
    const int64_t index = c.groupIndex(*p.seq_group), ways = c.groupSize(*p.seq_group);
    if (!c.error.empty())
      return false;
    if (ways > 1) {
      if (a.seq % 2 != 0)
        return c.fail("splits its queries head-tail into an odd block");
      wholeSeq = a.seq * ways;
      a.headStart = headtail::chunkOf(index, ways, 0) * (a.seq / 2);
      a.tailStart = headtail::chunkOf(index, ways, 1) * (a.seq / 2);
    }
  }
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvSeq <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      wholeHeads % a.kvHeads != 0 || ((a.causal || a.headStart >= 0) && a.kvSeq != wholeSeq))
    return c.fail("has inconsistent attention sizes");
  a.group = wholeHeads / a.kvHeads;
  return true;
}

/// q and out of [batch, seq, heads, head], k and v of [batch, kvSeq, kvHeads, head], lse of
/// [batch, seq, heads]; the gradient reads dout after them (and the forward call's out and
/// lse, both or neither) and writes dq, dk, dv.
template <class P> bool checkAttention(KernelCall &c, const P &p, args::Attention &args, bool grad) {
  kernels::AttentionArgs &a = args.a;
  if (!attentionArgsOf(c, p, a))
    return false;
  const int64_t rows = a.batch * a.seq * a.heads, q = rows * a.head;
  const int64_t kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needOut(0, q))
    return false;
  if (!grad) {
    args.lse = c.out.size() > 1;
    return !args.lse || c.needOut(1, rows);
  }
  if (c.in.size() == 5)
    return c.fail("takes the forward call's o and lse together");
  args.lse = c.in.size() > 5;
  return c.needIn(3, q) && c.needOut(1, kv) && c.needOut(2, kv) &&
         (!args.lse || (c.needIn(4, q) && c.needIn(5, rows)));
}
bool check(KernelCall &c, const catalogue::Attention &p, args::Attention &a) {
  return checkAttention(c, p, a, false);
}
bool check(KernelCall &c, const catalogue::AttentionGrad &p, args::AttentionGrad &a) {
  return checkAttention(c, p, a, true);
}

/// The sizes of a ring attention step, the places of its query and key blocks, and its
/// operands: q, k, v, then (the gradient) dout, out and lse; out and lse (the gradient: dq,
/// dk, dv).
template <class P> bool checkRingBlock(KernelCall &c, const P &p, args::AttentionBlock &args,
                                       bool grad) {
  kernels::RingBlockArgs &r = args.r;
  kernels::AttentionArgs &a = r.attention;
  args.first = p.step == 0;
  a.batch = p.batch;
  a.seq = a.kvSeq = p.seq;
  a.heads = p.heads;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.causal = p.causal != 0;
  a.scale = static_cast<float>(p.scale);
  int64_t wholeHeads = a.heads;
  const int64_t step = p.step;
  if (!blockOfDim(c, p.head_group ? &*p.head_group : nullptr, a.heads, a.firstHead, wholeHeads))
    return false;
  r.ways = c.groupSize(p.group);
  r.queryIndex = c.groupIndex(p.group);
  if (!c.error.empty())
    return false;
  if (a.batch <= 0 || a.seq <= 0 || a.seq % 2 != 0 || a.heads <= 0 || a.kvHeads <= 0 ||
      a.head <= 0 || wholeHeads % a.kvHeads != 0)
    return c.fail("has inconsistent attention sizes (the block of the sequence must be even)");
  if (step < 0 || step >= r.ways)
    return c.fail("has step " + std::to_string(step) + " outside its ring of " +
                  std::to_string(r.ways));
  a.group = wholeHeads / a.kvHeads;
  r.keyIndex = (r.queryIndex - step + r.ways) % r.ways;

  const int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.seq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv))
    return false;
  if (!grad)
    return c.needOut(0, q) && c.needOut(1, q / a.head);
  return c.needIn(3, q) && c.needIn(4, q) && c.needIn(5, q / a.head) && c.needOut(0, q) &&
         c.needOut(1, kv) && c.needOut(2, kv);
}
bool check(KernelCall &c, const catalogue::AttentionBlock &p, args::AttentionBlock &a) {
  return checkRingBlock(c, p, a, false);
}
bool check(KernelCall &c, const catalogue::AttentionBlockGrad &p, args::AttentionBlockGrad &a) {
  return checkRingBlock(c, p, a, true);
}

/// The new tokens q, k, v, their positions and the block table; the output and the two
/// caches, which the kernel reads and writes in place.
bool check(KernelCall &c, const catalogue::PagedAttention &p, args::PagedAttention &args) {
  kernels::PagedAttentionArgs &a = args.a;
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.kvHeads = p.kv_heads;
  a.head = p.head;
  a.blocks = p.blocks;
  a.blockSize = p.block_size;
  a.maxBlocks = p.max_blocks;
  a.scale = static_cast<float>(p.scale);
  a.window = p.window.value_or(0);
  if (a.blockSize < 1)
    return c.fail("has block_size " + std::to_string(a.blockSize) +
                  "; a cache block holds at least one position");
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      a.blocks <= 0 || a.maxBlocks <= 0)
    return c.fail("needs positive batch, seq, heads, kv_heads, head, blocks and max_blocks");
  if (a.heads % a.kvHeads != 0)
    return c.fail("has " + std::to_string(a.heads) + " query heads, not a multiple of its " +
                  std::to_string(a.kvHeads) + " kv heads");
  if (p.window && *p.window < 1)
    return c.fail("has a sliding window of " + std::to_string(*p.window) +
                  "; a window must be positive");
  if (!std::isfinite(a.scale))
    return c.fail("has a non-finite scale");
  // The kernels take positions and block ids as i32 (the operands' type): every position a
  // block table can name must fit one.
  if (a.maxBlocks > INT32_MAX / a.blockSize || a.blocks > INT32_MAX)
    return c.fail("has more cache positions than a 32-bit position or block id can name");
  const int64_t tokens = a.batch * a.seq;
  const int64_t q = tokens * a.heads * a.head, kv = tokens * a.kvHeads * a.head;
  const int64_t cache = a.blocks * a.blockSize * a.kvHeads * a.head;
  return c.needIn(0, q) && c.needIn(1, kv) && c.needIn(2, kv) && c.needIn(3, tokens) &&
         c.needIn(4, a.batch * a.maxBlocks) && c.needOut(0, q) && c.needOut(1, cache) &&
         c.needOut(2, cache);
}

/// The new tokens' values, positions and block table; the sums and the totals, which the
/// kernel reads and writes in place.
bool check(KernelCall &c, const catalogue::RunningSum &p, args::RunningSum &args) {
  kernels::RunningSumArgs &a = args.a;
  a.batch = p.batch;
  a.seq = p.seq;
  a.width = p.width;
  a.blocks = p.blocks;
  a.maxBlocks = p.max_blocks;
  a.inclusive = p.inclusive.value_or(false);
  if (a.batch <= 0 || a.seq <= 0 || a.width <= 0 || a.blocks <= 0 || a.maxBlocks <= 0)
    return c.fail("needs positive batch, seq, width, blocks and max_blocks");
  const int64_t tokens = a.batch * a.seq;
  return c.needIn(0, tokens * a.width) && c.needIn(1, tokens) &&
         c.needIn(2, a.batch * a.maxBlocks) && c.needOut(0, tokens * a.width) &&
         c.needOut(1, a.blocks * a.width);
}

bool check(KernelCall &c, const catalogue::Rope &p, args::Rope &a) {
  a.batch = p.batch;
  a.seq = p.seq;
  a.heads = p.heads;
  a.head = p.head;
  a.theta = static_cast<float>(p.theta);
  a.inverse = p.inverse != 0;
  a.positions = c.in.size() > 1;
  if (a.head % 2 != 0 || a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.head <= 0)
    return c.fail("needs positive sizes and an even head size");
  if (c.in.size() > 2)
    return c.fail("has " + std::to_string(c.in.size() - 1) +
                  " positions operands; it takes at most one");
  if (a.positions && p.seq_group)
    return c.fail("turns by given positions and by a sequence group's head-tail positions; it "
                  "takes one or the other");
  if (p.scaling_factor) {
    if (!p.low_freq_factor || !p.high_freq_factor || !p.original_context)
      return c.fail("scales its frequencies without low_freq_factor, high_freq_factor and "
                    "original_context");
    a.scaling = {*p.scaling_factor, *p.low_freq_factor, *p.high_freq_factor, *p.original_context};
    if (!(a.scaling.factor > 0) || !(a.scaling.lowFreqFactor > 0) ||
        !(a.scaling.highFreqFactor > a.scaling.lowFreqFactor) || !(a.scaling.originalContext > 0))
      return c.fail("needs a positive scaling factor and original context and "
                    "0 < low_freq_factor < high_freq_factor");
  }
  // Under a sequence group the positions here are a head-tail block of the whole.
  if (p.seq_group) {
    const int64_t index = c.groupIndex(*p.seq_group), ways = c.groupSize(*p.seq_group);
    if (!c.error.empty())
      return false;
    if (ways > 1 && p.seq % 2 != 0)
      return c.fail("splits its positions head-tail into an odd block");
    if (ways > 1) {
      a.headStart = headtail::chunkOf(index, ways, 0) * (p.seq / 2);
      a.tailStart = headtail::chunkOf(index, ways, 1) * (p.seq / 2);
    }
  }
  const int64_t n = a.batch * a.seq * a.heads * a.head;
  return c.needIn(0, n) && (!a.positions || c.needIn(1, a.batch * a.seq)) && c.needOut(0, n);
}

template <class P> bool embeddingOf(KernelCall &c, const P &p, args::Embedding &a) {
  a.n = p.n;
  a.rows = p.rows;
  a.cols = p.cols;
  return blockOfDim(c, p.row_group ? &*p.row_group : nullptr, a.rows, a.first, a.vocab) &&
         c.needIn(1, a.n);
}
bool check(KernelCall &c, const catalogue::Embedding &p, args::Embedding &a) {
  return embeddingOf(c, p, a) && c.needIn(0, a.rows * a.cols) && c.needOut(0, a.n * a.cols);
}
bool check(KernelCall &c, const catalogue::EmbeddingGrad &p, args::EmbeddingGrad &a) {
  return embeddingOf(c, p, a) && c.needIn(0, a.n * a.cols) && c.needOut(0, a.rows * a.cols);
}

//===----------------------------------------------------------------------===//
// Optimizer and control
//===----------------------------------------------------------------------===//

bool check(KernelCall &c, const catalogue::GlobalNorm &, args::GlobalNorm &) {
  return c.needOut(0, 1);
}
bool check(KernelCall &c, const catalogue::SumSquares &, args::SumSquares &) {
  if (c.in.empty())
    return c.fail("needs at least one input");
  return c.needOut(0, 1);
}
bool check(KernelCall &, const catalogue::GuardFinite &, args::GuardFinite &) { return true; }

bool check(KernelCall &c, const catalogue::ClipCoefficient &p, args::ClipCoefficient &a) {
  a.max = static_cast<float>(p.max);
  return c.needIn(0, 1) && c.needOut(0, 1);
}

bool check(KernelCall &c, const catalogue::LearningRate &p, args::LearningRate &a) {
  a.schedule = p;
  return c.needOut(0, 1);
}

bool check(KernelCall &c, const catalogue::AdamW &p, args::AdamW &a) {
  a.n = p.n;
  a.hyper.beta1 = static_cast<float>(p.beta1);
  a.hyper.beta2 = static_cast<float>(p.beta2);
  a.hyper.eps = static_cast<float>(p.eps);
  a.hyper.weightDecay = static_cast<float>(p.weight_decay);
  return c.needTensors(p.n, 1, 3, 1, &a.working);
}

bool check(KernelCall &c, const catalogue::Sgd &p, args::Sgd &a) {
  a.n = p.n;
  a.momentum = static_cast<float>(p.momentum);
  a.weightDecay = static_cast<float>(p.weight_decay);
  return c.needTensors(p.n, 1, 2);
}

/// Checks a call of the kernel whose parameters are P and whose arguments are A.
template <class P, class A>
bool checkAs(KernelCall &c, const catalogue::KernelParams &params, KernelArgs &out) {
  A a;
  if (!check(c, *std::get_if<P>(&params), a) || !c.error.empty())
    return false;
  out.value = std::move(a);
  return true;
}

} // namespace

bool checkKernelCall(KernelCall &c, const catalogue::KernelParams &params, KernelArgs &args) {
  using CheckFn = bool (*)(KernelCall &, const catalogue::KernelParams &, KernelArgs &);
  // Every kernel of the catalogue has a check: one missing fails to compile.
  static const CheckFn table[] = {
#define TESSEL_KERNEL(Id, Name, Family, Doc) &checkAs<catalogue::Id, args::Id>,
#include "common/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  if (params.index() == 0)
    return c.fail("has no decoded parameters");
  return table[params.index() - 1](c, params, args);
}

double scheduledLearningRate(const catalogue::LearningRate &p, int64_t step) {
  using catalogue::LrSchedule;
  const double lr = p.lr, minLr = p.min_lr;
  if (p.schedule == LrSchedule::Constant)
    return lr;
  const double s = static_cast<double>(step);
  if (p.warmup > 0 && s <= static_cast<double>(p.warmup))
    return lr * s / static_cast<double>(p.warmup);
  const double span = static_cast<double>(std::max<int64_t>(p.steps - p.warmup, 1));
  const double done = std::min(1.0, (s - static_cast<double>(p.warmup)) / span);
  return p.schedule == LrSchedule::Cosine
             ? minLr + 0.5 * (lr - minLr) * (1.0 + std::cos(M_PI * done))
             : lr + (minLr - lr) * done;
}

args::CrossEntropy stepLossScale(const KernelCall &c, const args::CrossEntropy &a) {
  const double factor = c.ctx ? c.ctx->targetScale : 1.0;
  if (factor == 1.0)
    return a;
  args::CrossEntropy scaled = a;
  scaled.scaled = true;
  scaled.scale = (a.scaled ? a.scale : 1.0 / static_cast<double>(a.rows)) * factor;
  return scaled;
}

double stepLossScale(const KernelCall &c, double scale) {
  return c.ctx ? scale * c.ctx->targetScale : scale;
}

uint64_t dropoutSeed(const KernelCall &c, int64_t mask) {
  return c.ctx->seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(c.ctx->step) << 20 ^
         static_cast<uint64_t>(mask);
}

void dropoutPlacement(const KernelCall &c, const args::Dropout &a, std::vector<int64_t> &offset,
                      std::vector<int64_t> &whole) {
  offset = a.offset;
  whole = a.whole;
  if (a.batchDim >= 0) {
    offset[a.batchDim] += c.ctx->micro * whole[a.batchDim];
    whole[a.batchDim] *= a.microBatches;
  }
}

void placeRingBlocks(kernels::RingBlockArgs &r) {
  const int64_t half = r.attention.seq / 2;
  r.attention.headStart = r.queryPosition(0);
  r.attention.tailStart = r.queryPosition(half);
  r.attention.keyHeadStart = r.keyPosition(0);
  r.attention.keyTailStart = r.keyPosition(half);
}

} // namespace tessel::rt
