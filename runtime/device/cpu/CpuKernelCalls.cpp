//===- CpuKernelCalls.cpp - Plan kernels on the CPU backend ---------------===//
//
// One handler per plan kernel (docs/plan-format.md lists their parameters): read the
// parameters, check the operands are large enough, call kernels/cpu.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CollectiveCalls.h"
#include "runtime/core/KernelCall.h"

#include "kernels/cpu/CpuKernels.h"

#include <cmath>
#include <map>

namespace tessel::rt {

namespace {

namespace cpu = tessel::cpu;

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

bool toShape(KernelCall &c, const std::vector<int64_t> &sizes, cpu::Shape &shape) {
  if (sizes.size() > static_cast<size_t>(cpu::kMaxRank))
    return c.fail("has rank " + std::to_string(sizes.size()) + "; at most " +
                  std::to_string(cpu::kMaxRank) + " is supported");
  shape.rank = static_cast<int>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0)
      return c.fail("has a non-positive size");
    shape.size[i] = sizes[i];
  }
  return true;
}

bool toStrides(KernelCall &c, const std::vector<int64_t> &in, size_t rank, cpu::Strides &out) {
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

bool fill(KernelCall &c) {
  int64_t n = c.i("n");
  float value = static_cast<float>(c.f("value"));
  if (!c.arity(0, 1) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  std::fill(c.fout(0), c.fout(0) + n, value);
  return true;
}

bool binary(KernelCall &c) {
  static const std::map<std::string, cpu::BinaryKind> kinds = {{"add", cpu::BinaryKind::Add},
                                                               {"sub", cpu::BinaryKind::Sub},
                                                               {"mul", cpu::BinaryKind::Mul},
                                                               {"div", cpu::BinaryKind::Div}};
  const std::string &op = c.s("op");
  const auto &sizes = c.v("shape"), &sa = c.v("a_strides"), &sb = c.v("b_strides");
  cpu::Shape shape;
  cpu::Strides a, b;
  auto kind = kinds.find(op);
  if (!c.arity(2, 1) || !toShape(c, sizes, shape) || !toStrides(c, sa, sizes.size(), a) ||
      !toStrides(c, sb, sizes.size(), b))
    return false;
  if (kind == kinds.end())
    return c.fail("unknown binary op '" + op + "'");
  if (!c.needIn(0, reach(sizes, sa)) || !c.needIn(1, reach(sizes, sb)) ||
      !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  cpu::binary(kind->second, shape, c.fin(0), a, c.fin(1), b, c.fout(0));
  return true;
}

const std::map<std::string, cpu::UnaryKind> &unaryKinds() {
  static const std::map<std::string, cpu::UnaryKind> kinds = {
      {"neg", cpu::UnaryKind::Neg},     {"exp", cpu::UnaryKind::Exp},
      {"log", cpu::UnaryKind::Log},     {"sqrt", cpu::UnaryKind::Sqrt},
      {"rsqrt", cpu::UnaryKind::Rsqrt}, {"tanh", cpu::UnaryKind::Tanh},
      {"gelu", cpu::UnaryKind::Gelu},   {"silu", cpu::UnaryKind::Silu},
      {"relu", cpu::UnaryKind::Relu},   {"sigmoid", cpu::UnaryKind::Sigmoid}};
  return kinds;
}

bool unary(KernelCall &c) {
  const std::string &op = c.s("op");
  int64_t n = c.i("n");
  auto kind = unaryKinds().find(op);
  if (!c.arity(1, 1))
    return false;
  if (kind == unaryKinds().end())
    return c.fail("unknown unary op '" + op + "'");
  if (!c.needIn(0, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::unary(kind->second, n, c.fin(0), c.fout(0));
  return true;
}

bool unaryGrad(KernelCall &c) {
  const std::string &op = c.s("op");
  int64_t n = c.i("n");
  auto kind = unaryKinds().find(op);
  if (!c.arity(3, 1))
    return false;
  if (kind == unaryKinds().end())
    return c.fail("unknown unary op '" + op + "'");
  if (!c.needIn(0, n) || !c.needIn(1, n) || !c.needIn(2, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::unaryGrad(kind->second, n, c.fin(0), c.fin(1), c.fin(2), c.fout(0));
  return true;
}

/// Dropout draws each element's mask from its index in the whole tensor of the whole step
/// batch: `shape` is this rank's block of one micro-batch, `groups` names per dim (separated by
/// commas) the group splitting it ("" for none), and micro-batch `micro` of `micro_batches`
/// covers its part of dim `batch_dim` (-1: the tensor has no batch dim). So every layout and
/// every accumulation drops the same elements as one rank with one micro-batch.
bool dropout(KernelCall &c) {
  const std::vector<int64_t> &shape = c.v("shape");
  const std::string &groups = c.s("groups");
  int64_t mask = c.i("mask"), batchDim = c.i("batch_dim"), microBatches = c.i("micro_batches");
  double rate = c.f("rate");
  if (!c.error.empty() || !c.arity(1, 1))
    return false;
  std::vector<std::string> names(1);
  for (char ch : groups) {
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
  if (batchDim < -1 || batchDim >= static_cast<int64_t>(shape.size()) || microBatches < 1)
    return c.fail("batch_dim must name a dim (or be -1) and micro_batches be positive");
  std::vector<int64_t> offset(shape.size(), 0), whole(shape);
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0)
      return c.fail("shape sizes must be positive");
    n *= shape[d];
    if (names[d].empty())
      continue;
    int64_t index = c.groupIndex(names[d]), size = c.groupSize(names[d]);
    if (!c.error.empty())
      return false;
    offset[d] = index * shape[d];
    whole[d] = size * shape[d];
  }
  if (!c.needIn(0, n) || !c.needOut(0, n))
    return false;
  if (!(rate >= 0 && rate < 1))
    return c.fail("rate must lie in [0, 1)");
  if (c.validating)
    return true;
  if (batchDim >= 0) {
    offset[batchDim] += c.ctx->micro * whole[batchDim];
    whole[batchDim] *= microBatches;
  }
  // One mask per (seed, step, dropout op): the backward pass reproduces it.
  uint64_t seed = c.ctx->seed * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(c.ctx->step) << 20 ^
                  static_cast<uint64_t>(mask);
  cpu::dropoutBlock(shape, offset, whole, static_cast<float>(rate), seed, c.fin(0), c.fout(0));
  return true;
}

bool copy(KernelCall &c) {
  const auto &sizes = c.v("shape"), &sx = c.v("x_strides");
  cpu::Shape shape;
  cpu::Strides x;
  if (!c.arity(1, 1) || !toShape(c, sizes, shape) || !toStrides(c, sx, sizes.size(), x) ||
      !c.needIn(0, reach(sizes, sx)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  cpu::stridedCopy(shape, c.fin(0), x, c.fout(0));
  return true;
}

bool reduce(KernelCall &c) {
  const auto &sizes = c.v("shape"), &sy = c.v("y_strides");
  int64_t yElements = c.i("y_elements");
  float scale = static_cast<float>(c.f("scale"));
  cpu::Shape shape;
  cpu::Strides y;
  if (!c.arity(1, 1) || !toShape(c, sizes, shape) || !toStrides(c, sy, sizes.size(), y) ||
      !c.needIn(0, product(sizes)) || !c.needOut(0, yElements) || !c.needOut(0, reach(sizes, sy)) ||
      c.validating)
    return c.error.empty();
  cpu::reduceSum(shape, c.fin(0), y, yElements, scale, c.fout(0));
  return true;
}

bool gemm(KernelCall &c) {
  const auto &batch = c.v("batch_shape"), &sa = c.v("a_batch_strides"),
             &sb = c.v("b_batch_strides"), &sc = c.v("c_batch_strides");
  cpu::GemmArgs g;
  g.m = c.i("m");
  g.n = c.i("n");
  g.k = c.i("k");
  g.transA = c.i("trans_a") != 0;
  g.transB = c.i("trans_b") != 0;
  g.lda = c.i("lda");
  g.ldb = c.i("ldb");
  g.ldc = c.i("ldc");
  if (!c.arity(2, 1))
    return false;
  if (sa.size() != batch.size() || sb.size() != batch.size() || sc.size() != batch.size())
    return c.fail("has batch strides that do not match its batch shape");
  if (g.m <= 0 || g.n <= 0 || g.k <= 0)
    return c.fail("has a non-positive matrix size");
  // The extent of one matrix, then of all batches.
  int64_t aRows = g.transA ? g.k : g.m, aCols = g.transA ? g.m : g.k;
  int64_t bRows = g.transB ? g.n : g.k, bCols = g.transB ? g.k : g.n;
  if (g.lda < aCols || g.ldb < bCols || g.ldc < g.n)
    return c.fail("has a leading dimension smaller than its matrix");
  if (!c.needIn(0, reach(batch, sa) - 1 + (aRows - 1) * g.lda + aCols) ||
      !c.needIn(1, reach(batch, sb) - 1 + (bRows - 1) * g.ldb + bCols) ||
      !c.needOut(0, reach(batch, sc) - 1 + (g.m - 1) * g.ldc + g.n) || c.validating)
    return c.error.empty();

  // All batch dims but the last are looped here; the last is the kernel's strided batch.
  size_t outer = batch.empty() ? 0 : batch.size() - 1;
  g.batch = batch.empty() ? 1 : batch.back();
  g.strideA = batch.empty() ? 0 : sa.back();
  g.strideB = batch.empty() ? 0 : sb.back();
  g.strideC = batch.empty() ? 0 : sc.back();
  std::vector<int64_t> index(outer, 0);
  int64_t outerCount = 1;
  for (size_t d = 0; d < outer; ++d)
    outerCount *= batch[d];
  for (int64_t o = 0; o < outerCount; ++o) {
    int64_t offA = 0, offB = 0, offC = 0, rest = o;
    for (int d = static_cast<int>(outer) - 1; d >= 0; --d) {
      int64_t i = rest % batch[d];
      rest /= batch[d];
      offA += i * sa[d];
      offB += i * sb[d];
      offC += i * sc[d];
    }
    cpu::gemm(g, c.fin(0) + offA, c.fin(1) + offB, c.fout(0) + offC);
  }
  return true;
}

bool rowsCols(KernelCall &c, int64_t &rows, int64_t &cols) {
  rows = c.i("rows");
  cols = c.i("cols");
  if (c.error.empty() && (rows <= 0 || cols <= 0))
    return c.fail("has non-positive rows or cols");
  return c.error.empty();
}

bool softmax(KernelCall &c) {
  int64_t rows, cols;
  if (!rowsCols(c, rows, cols) || !c.arity(1, 1) || !c.needIn(0, rows * cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::softmax(rows, cols, c.fin(0), c.fout(0));
  return true;
}

bool softmaxGrad(KernelCall &c) {
  int64_t rows, cols;
  if (!rowsCols(c, rows, cols) || !c.arity(2, 1) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows * cols) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::softmaxGrad(rows, cols, c.fin(0), c.fin(1), c.fout(0));
  return true;
}

bool layerNorm(KernelCall &c) {
  int64_t rows, cols;
  float eps = static_cast<float>(c.f("eps"));
  if (!rowsCols(c, rows, cols) || !c.arity(3, 1) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, cols) || !c.needIn(2, cols) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::layerNorm(rows, cols, c.fin(0), c.fin(1), c.fin(2), eps, c.fout(0));
  return true;
}

bool layerNormGrad(KernelCall &c) {
  int64_t rows, cols;
  float eps = static_cast<float>(c.f("eps"));
  if (!rowsCols(c, rows, cols) || !c.arity(3, 3) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, cols) || !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) ||
      !c.needOut(1, cols) || !c.needOut(2, cols) || c.validating)
    return c.error.empty();
  cpu::layerNormGrad(rows, cols, c.fin(0), c.fin(1), c.fin(2), eps, c.fout(0), c.fout(1),
                     c.fout(2));
  return true;
}

bool rmsNorm(KernelCall &c) {
  int64_t rows, cols;
  float eps = static_cast<float>(c.f("eps"));
  if (!rowsCols(c, rows, cols) || !c.arity(2, 1) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, cols) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::rmsNorm(rows, cols, c.fin(0), c.fin(1), eps, c.fout(0));
  return true;
}

bool rmsNormGrad(KernelCall &c) {
  int64_t rows, cols;
  float eps = static_cast<float>(c.f("eps"));
  if (!rowsCols(c, rows, cols) || !c.arity(3, 2) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, cols) || !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) ||
      !c.needOut(1, cols) || c.validating)
    return c.error.empty();
  cpu::rmsNormGrad(rows, cols, c.fin(0), c.fin(1), c.fin(2), eps, c.fout(0), c.fout(1));
  return true;
}

/// Where this rank's block of a dim split over the group named by string attr `attr` lies:
/// [first, first + size) of `whole`. Without the attr the rank holds the whole dim.
bool blockOfDim(KernelCall &c, const char *attr, int64_t size, int64_t &first, int64_t &whole) {
  first = 0;
  whole = size;
  if (!c.instr->find(attr))
    return c.error.empty();
  const CommGroup *g = c.group(c.s(attr));
  if (!g)
    return false;
  first = static_cast<int64_t>(g->index) * size;
  whole = size * g->size();
  return true;
}

bool embedding(KernelCall &c) {
  int64_t n = c.i("n"), rows = c.i("rows"), cols = c.i("cols"), first, vocab;
  if (!blockOfDim(c, "row_group", rows, first, vocab) || !c.arity(2, 1) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, n) || !c.needOut(0, n * cols) || c.validating)
    return c.error.empty();
  return cpu::embeddingRows(n, rows, cols, first, vocab, c.fin(0), c.ids(1), c.fout(0), c.error);
}

bool embeddingGrad(KernelCall &c) {
  int64_t n = c.i("n"), rows = c.i("rows"), cols = c.i("cols"), first, vocab;
  if (!blockOfDim(c, "row_group", rows, first, vocab) || !c.arity(2, 1) || !c.needIn(0, n * cols) ||
      !c.needIn(1, n) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return cpu::embeddingGradRows(n, rows, cols, first, vocab, c.fin(0), c.ids(1), c.fout(0),
                                c.error);
}

/// The optional `scale` of a loss: absent, the loss is the mean over rows.
bool lossScale(KernelCall &c, bool &scaled, double &scale) {
  scaled = c.instr->find("scale") != nullptr;
  scale = scaled ? c.f("scale") : 0.0;
  if (scaled && c.error.empty() && !std::isfinite(scale))
    return c.fail("has a non-finite scale");
  return c.error.empty();
}

bool crossEntropy(KernelCall &c) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, rows, cols) || !lossScale(c, scaled, scale) || !c.arity(2, 1) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, rows) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  if (scaled)
    return cpu::crossEntropy(rows, cols, c.fin(0), c.ids(1), scale, c.fout(0), c.error);
  return cpu::crossEntropy(rows, cols, c.fin(0), c.ids(1), c.fout(0), c.error);
}

bool crossEntropyGrad(KernelCall &c) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, rows, cols) || !lossScale(c, scaled, scale) || !c.arity(3, 1) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, rows) || !c.needIn(2, 1) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  if (scaled)
    return cpu::crossEntropyGrad(rows, cols, c.fin(0), c.ids(1), c.fin(2), scale, c.fout(0),
                                 c.error);
  return cpu::crossEntropyGrad(rows, cols, c.fin(0), c.ids(1), c.fin(2), c.fout(0), c.error);
}

bool ceMax(KernelCall &c) {
  int64_t rows, cols;
  if (!rowsCols(c, rows, cols) || !c.arity(1, 1) || !c.needIn(0, rows * cols) ||
      !c.needOut(0, rows) || c.validating)
    return c.error.empty();
  cpu::ceMax(rows, cols, c.fin(0), c.fout(0));
  return true;
}

bool ceSums(KernelCall &c) {
  int64_t rows, cols, first, classes;
  if (!rowsCols(c, rows, cols) || !blockOfDim(c, "col_group", cols, first, classes) ||
      !c.arity(3, 2) || !c.needIn(0, rows * cols) || !c.needIn(1, rows) || !c.needIn(2, rows) ||
      !c.needOut(0, rows) || !c.needOut(1, rows) || c.validating)
    return c.error.empty();
  return cpu::ceSums(rows, cols, first, classes, c.fin(0), c.ids(1), c.fin(2), c.fout(0), c.fout(1),
                     c.error);
}

bool ceLoss(KernelCall &c) {
  int64_t rows = c.i("rows");
  double scale = c.f("scale");
  if (!c.arity(3, 1))
    return false;
  if (rows <= 0 || !std::isfinite(scale))
    return c.fail("needs positive rows and a finite scale");
  if (!c.needIn(0, rows) || !c.needIn(1, rows) || !c.needIn(2, rows) || !c.needOut(0, 1) ||
      c.validating)
    return c.error.empty();
  cpu::ceLoss(rows, c.fin(0), c.fin(1), c.fin(2), scale, c.fout(0));
  return true;
}

bool ceGrad(KernelCall &c) {
  int64_t rows, cols, first, classes;
  double scale = c.f("scale");
  if (!rowsCols(c, rows, cols))
    return false;
  if (!std::isfinite(scale))
    return c.fail("has a non-finite scale");
  if (!blockOfDim(c, "col_group", cols, first, classes) || !c.arity(5, 1) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, rows) || !c.needIn(2, rows) || !c.needIn(3, rows) ||
      !c.needIn(4, 1) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return cpu::ceGrad(rows, cols, first, classes, c.fin(0), c.ids(1), c.fin(2), c.fin(3), c.fin(4),
                     scale, c.fout(0), c.error);
}

bool attentionArgs(KernelCall &c, cpu::AttentionArgs &a) {
  a.batch = c.i("batch");
  a.seq = c.i("seq");
  a.heads = c.i("heads");
  a.kvSeq = c.i("kv_seq");
  a.kvHeads = c.i("kv_heads");
  a.head = c.i("head");
  a.causal = c.i("causal") != 0;
  a.scale = static_cast<float>(c.f("scale"));
  if (!c.error.empty())
    return false;
  if (a.batch <= 0 || a.seq <= 0 || a.heads <= 0 || a.kvSeq <= 0 || a.kvHeads <= 0 || a.head <= 0 ||
      a.heads % a.kvHeads != 0 || (a.causal && a.kvSeq != a.seq))
    return c.fail("has inconsistent attention sizes");
  return true;
}

bool attention(KernelCall &c) {
  cpu::AttentionArgs a;
  if (!attentionArgs(c, a) || !c.arity(3, 1))
    return false;
  int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needOut(0, q) || c.validating)
    return c.error.empty();
  cpu::attention(a, c.fin(0), c.fin(1), c.fin(2), c.fout(0));
  return true;
}

bool attentionGrad(KernelCall &c) {
  cpu::AttentionArgs a;
  if (!attentionArgs(c, a) || !c.arity(4, 3))
    return false;
  int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needIn(3, q) ||
      !c.needOut(0, q) || !c.needOut(1, kv) || !c.needOut(2, kv) || c.validating)
    return c.error.empty();
  cpu::attentionGrad(a, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fout(0), c.fout(1), c.fout(2));
  return true;
}

bool rope(KernelCall &c) {
  int64_t batch = c.i("batch"), seq = c.i("seq"), heads = c.i("heads"), head = c.i("head");
  float theta = static_cast<float>(c.f("theta"));
  bool inverse = c.i("inverse") != 0;
  int64_t n = batch * seq * heads * head;
  if (!c.arity(1, 1))
    return false;
  if (head % 2 != 0 || n <= 0)
    return c.fail("needs positive sizes and an even head size");
  if (!c.needIn(0, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::rope(batch, seq, heads, head, theta, inverse, c.fin(0), c.fout(0));
  return true;
}

bool accumulate(KernelCall &c) {
  int64_t n = c.i("n");
  if (!c.arity(1, 1) || !c.needIn(0, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::Shape shape;
  shape.rank = 1;
  shape.size[0] = n;
  cpu::Strides dense = cpu::denseStrides(shape);
  cpu::binary(cpu::BinaryKind::Add, shape, c.fout(0), dense, c.fin(0), dense, c.fout(0));
  return true;
}

bool globalNorm(KernelCall &c) {
  if (!c.arity(c.in.size(), 1) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  double sum = 0;
  for (size_t k = 0; k < c.in.size(); ++k)
    sum += cpu::sumOfSquares(static_cast<int64_t>(c.inElements[k]), c.fin(k));
  c.fout(0)[0] = static_cast<float>(std::sqrt(sum));
  return true;
}

bool sumSquares(KernelCall &c) {
  if (c.in.empty())
    return c.fail("needs at least one input");
  if (!c.arity(c.in.size(), 1) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  // In input order, each input's sum in double: the same bits however the plan is run.
  double sum = 0;
  for (size_t k = 0; k < c.in.size(); ++k)
    sum += cpu::sumOfSquares(static_cast<int64_t>(c.inElements[k]), c.fin(k));
  c.fout(0)[0] = static_cast<float>(sum);
  return true;
}

bool pack(KernelCall &c) {
  int64_t ways = c.i("ways");
  const auto &outers = c.v("outers"), &chunks = c.v("chunks");
  if (!c.error.empty())
    return false;
  if (c.in.empty() || outers.size() != c.in.size() || chunks.size() != c.in.size())
    return c.fail("needs one 'outers' and one 'chunks' entry per input, and an input");
  if (ways <= 0)
    return c.fail("needs a positive 'ways'");
  int64_t part = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    if (outers[k] <= 0 || chunks[k] <= 0)
      return c.fail("has a non-positive outer or chunk size");
    if (!c.needIn(k, outers[k] * ways * chunks[k]))
      return false;
    part += outers[k] * chunks[k];
  }
  if (!c.arity(c.in.size(), 1) || !c.needOut(0, ways * part) || c.validating)
    return c.error.empty();
  std::vector<const float *> inputs;
  for (size_t k = 0; k < c.in.size(); ++k)
    inputs.push_back(c.fin(k));
  cpu::pack(static_cast<int64_t>(inputs.size()), inputs.data(), outers.data(), chunks.data(), ways,
            c.fout(0));
  return true;
}

bool shardSlice(KernelCall &c) {
  int64_t outer = c.i("outer"), chunk = c.i("chunk");
  const CommGroup *g = c.group(c.s("group"));
  if (!g || !c.arity(1, 1))
    return false;
  if (outer <= 0 || chunk <= 0)
    return c.fail("has a non-positive outer or chunk size");
  const int64_t ways = g->size();
  if (!c.needIn(0, outer * ways * chunk) || !c.needOut(0, outer * chunk) || c.validating)
    return c.error.empty();
  // y[o, :] = x[o, me, :]: a strided copy of [outer, chunk] starting at block `me`.
  cpu::Shape shape;
  shape.rank = 2;
  shape.size[0] = outer;
  shape.size[1] = chunk;
  cpu::Strides x;
  x.stride[0] = ways * chunk;
  x.stride[1] = 1;
  cpu::stridedCopy(shape, c.fin(0) + static_cast<int64_t>(g->index) * chunk, x, c.fout(0));
  return true;
}

bool clipCoefficient(KernelCall &c) {
  float max = static_cast<float>(c.f("max"));
  if (!c.arity(1, 1) || !c.needIn(0, 1) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  // As torch.nn.utils.clip_grad_norm_: max / (norm + 1e-6), clamped at 1, in f32.
  float coefficient = max / (c.fin(0)[0] + 1e-6f);
  c.fout(0)[0] = std::min(coefficient, 1.0f);
  return true;
}

bool learningRate(KernelCall &c) {
  const std::string &schedule = c.s("schedule");
  double lr = c.f("lr"), minLr = c.f("min_lr");
  int64_t warmup = c.i("warmup"), steps = c.i("steps");
  if (!c.arity(0, 1) || !c.needOut(0, 1))
    return false;
  if (schedule != "constant" && schedule != "cosine" && schedule != "linear")
    return c.fail("unknown schedule '" + schedule + "'");
  if (c.validating)
    return true;
  double s = static_cast<double>(c.ctx->step), value = lr;
  if (schedule != "constant") {
    if (warmup > 0 && s <= static_cast<double>(warmup)) {
      value = lr * s / static_cast<double>(warmup);
    } else {
      double span = static_cast<double>(std::max<int64_t>(steps - warmup, 1));
      double p = std::min(1.0, (s - static_cast<double>(warmup)) / span);
      value = schedule == "cosine" ? minLr + 0.5 * (lr - minLr) * (1.0 + std::cos(M_PI * p))
                                   : lr + (minLr - lr) * p;
    }
  }
  c.fout(0)[0] = static_cast<float>(value);
  return true;
}

bool adamw(KernelCall &c) {
  int64_t n = c.i("n");
  cpu::AdamWArgs a;
  a.beta1 = static_cast<float>(c.f("beta1"));
  a.beta2 = static_cast<float>(c.f("beta2"));
  a.eps = static_cast<float>(c.f("eps"));
  a.weightDecay = static_cast<float>(c.f("weight_decay"));
  if (!c.arity(3, 3) || !c.needIn(0, n) || !c.needIn(1, 1) || !c.needIn(2, 1) || !c.needOut(0, n) ||
      !c.needOut(1, n) || !c.needOut(2, n) || c.validating)
    return c.error.empty();
  a.lr = c.fin(1)[0];
  a.gradScale = c.fin(2)[0];
  a.step = c.ctx->step;
  cpu::adamw(a, n, c.fout(0), c.fin(0), c.fout(1), c.fout(2));
  return true;
}

bool sgd(KernelCall &c) {
  int64_t n = c.i("n");
  float momentum = static_cast<float>(c.f("momentum"));
  float decay = static_cast<float>(c.f("weight_decay"));
  if (!c.arity(3, 2) || !c.needIn(0, n) || !c.needIn(1, 1) || !c.needIn(2, 1) || !c.needOut(0, n) ||
      !c.needOut(1, n) || c.validating)
    return c.error.empty();
  // As torch.optim.SGD (no dampening, no Nesterov); the buffer starts at zero, so the first
  // step's buffer is the gradient itself.
  float lr = c.fin(1)[0], scale = c.fin(2)[0];
  const float *g = c.fin(0);
  float *p = c.fout(0), *buf = c.fout(1);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i] * scale + decay * p[i];
    buf[i] = momentum * buf[i] + d;
    p[i] -= lr * buf[i];
  }
  return true;
}

} // namespace

KernelFn findCpuKernel(const std::string &name) {
  static const std::map<std::string, KernelFn> kernels = {
      {"accumulate", accumulate},
      {"adamw", adamw},
      {"all_gather", allGatherCall},
      {"all_reduce", allReduceCall},
      {"all_to_all", allToAllCall},
      {"attention", attention},
      {"attention_grad", attentionGrad},
      {"binary", binary},
      {"broadcast", broadcastCall},
      {"ce_grad", ceGrad},
      {"ce_loss", ceLoss},
      {"ce_max", ceMax},
      {"ce_sums", ceSums},
      {"clip_coefficient", clipCoefficient},
      {"copy", copy},
      {"cross_entropy", crossEntropy},
      {"cross_entropy_grad", crossEntropyGrad},
      {"dropout", dropout},
      {"embedding", embedding},
      {"embedding_grad", embeddingGrad},
      {"fill", fill},
      {"gemm", gemm},
      {"global_norm", globalNorm},
      {"layernorm", layerNorm},
      {"layernorm_grad", layerNormGrad},
      {"learning_rate", learningRate},
      {"pack", pack},
      {"recv", recvCall},
      {"reduce", reduce},
      {"reduce_scatter", reduceScatterCall},
      {"rmsnorm", rmsNorm},
      {"rmsnorm_grad", rmsNormGrad},
      {"rope", rope},
      {"send", sendCall},
      {"sgd", sgd},
      {"shard_slice", shardSlice},
      {"softmax", softmax},
      {"softmax_grad", softmaxGrad},
      {"sum_squares", sumSquares},
      {"unary", unary},
      {"unary_grad", unaryGrad},
      {"wait", waitCall},
  };
  auto it = kernels.find(name);
  return it == kernels.end() ? nullptr : it->second;
}

} // namespace tessel::rt
