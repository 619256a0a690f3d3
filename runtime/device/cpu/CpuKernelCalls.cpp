//===- CpuKernelCalls.cpp - Plan kernels on the CPU backend ---------------===//
//
// One handler per plan kernel (docs/plan-format.md lists their parameters): read the
// parameters, check the operands are large enough, call kernels/cpu.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CollectiveCalls.h"
#include "runtime/core/KernelCall.h"
#include "runtime/device/KernelOperands.h"

#include "kernels/cpu/CpuKernels.h"

#include "common/HeadTail.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>

namespace tessel::rt {

namespace {

namespace cpu = tessel::cpu;

cpu::BinaryKind binaryKind(catalogue::BinaryOp op) {
  switch (op) {
  case catalogue::BinaryOp::Add:
    return cpu::BinaryKind::Add;
  case catalogue::BinaryOp::Sub:
    return cpu::BinaryKind::Sub;
  case catalogue::BinaryOp::Mul:
    return cpu::BinaryKind::Mul;
  case catalogue::BinaryOp::Div:
    return cpu::BinaryKind::Div;
  case catalogue::BinaryOp::Lt:
    return cpu::BinaryKind::Lt;
  case catalogue::BinaryOp::Le:
    return cpu::BinaryKind::Le;
  case catalogue::BinaryOp::Gt:
    return cpu::BinaryKind::Gt;
  case catalogue::BinaryOp::Ge:
    return cpu::BinaryKind::Ge;
  case catalogue::BinaryOp::Eq:
    return cpu::BinaryKind::Eq;
  case catalogue::BinaryOp::Ne:
    return cpu::BinaryKind::Ne;
  }
  return cpu::BinaryKind::Add;
}

cpu::UnaryKind unaryKind(catalogue::UnaryOp op) {
  switch (op) {
  case catalogue::UnaryOp::Neg:
    return cpu::UnaryKind::Neg;
  case catalogue::UnaryOp::Exp:
    return cpu::UnaryKind::Exp;
  case catalogue::UnaryOp::Log:
    return cpu::UnaryKind::Log;
  case catalogue::UnaryOp::Sqrt:
    return cpu::UnaryKind::Sqrt;
  case catalogue::UnaryOp::Rsqrt:
    return cpu::UnaryKind::Rsqrt;
  case catalogue::UnaryOp::Tanh:
    return cpu::UnaryKind::Tanh;
  case catalogue::UnaryOp::Gelu:
    return cpu::UnaryKind::Gelu;
  case catalogue::UnaryOp::Silu:
    return cpu::UnaryKind::Silu;
  case catalogue::UnaryOp::Relu:
    return cpu::UnaryKind::Relu;
  case catalogue::UnaryOp::Sigmoid:
    return cpu::UnaryKind::Sigmoid;
  case catalogue::UnaryOp::Square:
    return cpu::UnaryKind::Square;
  case catalogue::UnaryOp::Pow:
    return cpu::UnaryKind::Pow;
  case catalogue::UnaryOp::GeluErf:
    return cpu::UnaryKind::GeluErf;
  }
  return cpu::UnaryKind::Neg;
}

bool run(KernelCall &c, const catalogue::Fill &p) {
  int64_t n = p.n;
  float value = static_cast<float>(p.value);
  if (!c.needOut(0, n) || c.validating)
    return c.error.empty();
  std::fill(c.fout(0), c.fout(0) + n, value);
  return true;
}

bool run(KernelCall &c, const catalogue::Binary &p) {
  const auto &sizes = p.shape, &sa = p.a_strides, &sb = p.b_strides;
  cpu::Shape shape;
  cpu::Strides a, b;
  if (!toShape(c, sizes, shape) || !toStrides(c, sa, sizes.size(), a) ||
      !toStrides(c, sb, sizes.size(), b))
    return false;
  if (!c.needIn(0, reach(sizes, sa)) || !c.needIn(1, reach(sizes, sb)) ||
      !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  cpu::binary(binaryKind(p.op), shape, c.fin(0), a, c.fin(1), b, c.fout(0));
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

bool run(KernelCall &c, const catalogue::Unary &p) {
  int64_t n = p.n;
  float exponent = 0.0f;
  if (!exponentOf(c, p.op, p.exponent, exponent) || !c.needIn(0, n) || !c.needOut(0, n) ||
      c.validating)
    return c.error.empty();
  cpu::unary(unaryKind(p.op), n, c.fin(0), c.fout(0), exponent);
  return true;
}

bool run(KernelCall &c, const catalogue::UnaryGrad &p) {
  int64_t n = p.n;
  float exponent = 0.0f;
  if (!exponentOf(c, p.op, p.exponent, exponent) || !c.needIn(0, n) || !c.needIn(1, n) ||
      !c.needIn(2, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::unaryGrad(unaryKind(p.op), n, c.fin(0), c.fin(1), c.fin(2), c.fout(0), exponent);
  return true;
}

bool run(KernelCall &c, const catalogue::Where &p) {
  const auto &sizes = p.shape;
  cpu::Shape shape;
  cpu::Strides sc, sa, sb;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.cond_strides, sizes.size(), sc) ||
      !toStrides(c, p.a_strides, sizes.size(), sa) || !toStrides(c, p.b_strides, sizes.size(), sb))
    return false;
  if (!c.needIn(0, reach(sizes, p.cond_strides)) || !c.needIn(1, reach(sizes, p.a_strides)) ||
      !c.needIn(2, reach(sizes, p.b_strides)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  cpu::select(shape, c.fin(0), sc, c.fin(1), sa, c.fin(2), sb, c.fout(0));
  return true;
}

/// A fused elementwise body as the CPU kernel runs it; false (with the reason) if it reads an
/// input the instruction lacks, or `outputs` names a step it does not have.
bool run(KernelCall &c, const catalogue::FusedElementwise &p) {
  FusedCall f;
  if (!fusedCall(c, p, f))
    return c.error.empty();
  cpu::fusedElementwise(f.shape, f.steps, f.ins, f.strides, f.outs, f.outSteps);
  return true;
}

bool run(KernelCall &c, const catalogue::Positions &p) {
  int64_t n = p.n;
  if (!c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::positions(n, c.fout(0));
  return true;
}

/// Dropout draws each element's mask from its index in the whole tensor of the whole step
/// batch: `shape` is this rank's block of one micro-batch, `groups` names per dim (separated by
/// commas) the group splitting it ("" for none), and micro-batch `micro` of `micro_batches`
/// covers its part of dim `batch_dim` (-1: the tensor has no batch dim). So every layout and
/// every accumulation drops the same elements as one rank with one micro-batch.
bool run(KernelCall &c, const catalogue::Dropout &p) {
  std::vector<int64_t> offset, tail, whole;
  int64_t n = 0;
  if (!dropoutBlock(c, p, offset, tail, whole, n) || c.validating)
    return c.error.empty();
  cpu::dropoutBlock(p.shape, offset, tail, whole, static_cast<float>(p.rate),
                    dropoutSeed(c, p.mask), c.fin(0), c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::Copy &p) {
  const auto &sizes = p.shape, &sx = p.x_strides;
  cpu::Shape shape;
  cpu::Strides x;
  if (!toShape(c, sizes, shape) || !toStrides(c, sx, sizes.size(), x) ||
      !c.needIn(0, reach(sizes, sx)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  cpu::stridedCopy(shape, c.fin(0), x, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::Reduce &p) {
  const auto &sizes = p.shape, &sy = p.y_strides;
  int64_t yElements = p.y_elements;
  float scale = static_cast<float>(p.scale);
  cpu::Shape shape;
  cpu::Strides y;
  if (!toShape(c, sizes, shape) || !toStrides(c, sy, sizes.size(), y) ||
      !c.needIn(0, product(sizes)) || !c.needOut(0, yElements) || !c.needOut(0, reach(sizes, sy)) ||
      c.validating)
    return c.error.empty();
  cpu::reduceSum(shape, c.fin(0), y, yElements, scale, c.fout(0), p.accumulate.value_or(false));
  return true;
}

bool run(KernelCall &c, const catalogue::Gemm &p) {
  GemmCalls calls;
  if (!gemmCalls(c, p, calls))
    return c.error.empty();
  for (const auto &[a, b, out] : calls.offsets)
    cpu::gemm(calls.args, c.fin(0) + a, c.fin(1) + b, c.fout(0) + out);
  return true;
}

bool run(KernelCall &c, const catalogue::Softmax &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needOut(0, rows * cols) ||
      c.validating)
    return c.error.empty();
  cpu::softmax(rows, cols, c.fin(0), c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::SoftmaxGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, rows * cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::softmaxGrad(rows, cols, c.fin(0), c.fin(1), c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::TopKMask &p) {
  int64_t rows, cols;
  if (!topKMaskArgs(c, p, rows, cols))
    return false;
  if (!c.validating)
    cpu::topKMask(rows, cols, p.k, c.fin(0), c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::LayerNorm &p) {
  int64_t rows, cols;
  float eps = static_cast<float>(p.eps);
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, cols) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::layerNorm(rows, cols, c.fin(0), c.fin(1), c.fin(2), eps, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::LayerNormGrad &p) {
  int64_t rows, cols;
  float eps = static_cast<float>(p.eps);
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) || !c.needOut(1, cols) ||
      !c.needOut(2, cols) || c.validating)
    return c.error.empty();
  cpu::layerNormGrad(rows, cols, c.fin(0), c.fin(1), c.fin(2), eps, c.fout(0), c.fout(1),
                     c.fout(2));
  return true;
}

bool run(KernelCall &c, const catalogue::RmsNorm &p) {
  int64_t rows, cols;
  float eps = static_cast<float>(p.eps);
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  cpu::rmsNorm(rows, cols, c.fin(0), c.fin(1), eps, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::RmsNormGrad &p) {
  int64_t rows, cols;
  float eps = static_cast<float>(p.eps);
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) || !c.needOut(1, cols) ||
      c.validating)
    return c.error.empty();
  cpu::rmsNormGrad(rows, cols, c.fin(0), c.fin(1), c.fin(2), eps, c.fout(0), c.fout(1));
  return true;
}

bool run(KernelCall &c, const catalogue::Embedding &p) {
  int64_t n = p.n, rows = p.rows, cols = p.cols, first, vocab;
  if (!blockOfDim(c, p.row_group ? &*p.row_group : nullptr, rows, first, vocab) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, n) || !c.needOut(0, n * cols) || c.validating)
    return c.error.empty();
  return cpu::embeddingRows(n, rows, cols, first, vocab, c.fin(0), c.ids(1), c.fout(0), c.error);
}

bool run(KernelCall &c, const catalogue::EmbeddingGrad &p) {
  int64_t n = p.n, rows = p.rows, cols = p.cols, first, vocab;
  if (!blockOfDim(c, p.row_group ? &*p.row_group : nullptr, rows, first, vocab) ||
      !c.needIn(0, n * cols) || !c.needIn(1, n) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return cpu::embeddingGradRows(n, rows, cols, first, vocab, c.fin(0), c.ids(1), c.fout(0),
                                c.error);
}

/// The optional `scale` of a loss: absent, the loss is the mean over rows.
template <class P> bool lossScale(KernelCall &c, const P &p, bool &scaled, double &scale) {
  scaled = p.scale.has_value();
  scale = p.scale.value_or(0.0);
  if (scaled && !std::isfinite(scale))
    return c.fail("has a non-finite scale");
  return true;
}

bool run(KernelCall &c, const catalogue::CrossEntropy &p) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, p, rows, cols) || !lossScale(c, p, scaled, scale) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  if (scaled)
    return cpu::crossEntropy(rows, cols, c.fin(0), c.ids(1), scale, c.fout(0), c.error);
  return cpu::crossEntropy(rows, cols, c.fin(0), c.ids(1), c.fout(0), c.error);
}

bool run(KernelCall &c, const catalogue::CrossEntropyGrad &p) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, p, rows, cols) || !lossScale(c, p, scaled, scale) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needIn(2, 1) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  if (scaled)
    return cpu::crossEntropyGrad(rows, cols, c.fin(0), c.ids(1), c.fin(2), scale, c.fout(0),
                                 c.error);
  return cpu::crossEntropyGrad(rows, cols, c.fin(0), c.ids(1), c.fin(2), c.fout(0), c.error);
}

bool run(KernelCall &c, const catalogue::CeMax &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needOut(0, rows) ||
      c.validating)
    return c.error.empty();
  cpu::ceMax(rows, cols, c.fin(0), c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::CeSums &p) {
  int64_t rows, cols, first, classes;
  if (!rowsCols(c, p, rows, cols) || !blockOfDim(c, &p.col_group, cols, first, classes) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, rows) || !c.needIn(2, rows) ||
      !c.needOut(0, rows) || !c.needOut(1, rows) || c.validating)
    return c.error.empty();
  return cpu::ceSums(rows, cols, first, classes, c.fin(0), c.ids(1), c.fin(2), c.fout(0), c.fout(1),
                     c.error);
}

bool run(KernelCall &c, const catalogue::CeLoss &p) {
  int64_t rows = p.rows;
  double scale = p.scale;
  if (rows <= 0 || !std::isfinite(scale))
    return c.fail("needs positive rows and a finite scale");
  if (!c.needIn(0, rows) || !c.needIn(1, rows) || !c.needIn(2, rows) || !c.needOut(0, 1) ||
      c.validating)
    return c.error.empty();
  cpu::ceLoss(rows, c.fin(0), c.fin(1), c.fin(2), scale, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::CeGrad &p) {
  int64_t rows, cols, first, classes;
  double scale = p.scale;
  if (!rowsCols(c, p, rows, cols))
    return false;
  if (!std::isfinite(scale))
    return c.fail("has a non-finite scale");
  if (!blockOfDim(c, &p.col_group, cols, first, classes) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needIn(2, rows) || !c.needIn(3, rows) || !c.needIn(4, 1) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return cpu::ceGrad(rows, cols, first, classes, c.fin(0), c.ids(1), c.fin(2), c.fin(3), c.fin(4),
                     scale, c.fout(0), c.error);
}

bool run(KernelCall &c, const catalogue::Attention &p) {
  cpu::AttentionArgs a;
  if (!attentionArgs(c, p, a))
    return false;
  int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needOut(0, q) || c.validating)
    return c.error.empty();
  cpu::attention(a, c.fin(0), c.fin(1), c.fin(2), c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::AttentionGrad &p) {
  cpu::AttentionArgs a;
  if (!attentionArgs(c, p, a))
    return false;
  int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needIn(3, q) ||
      !c.needOut(0, q) || !c.needOut(1, kv) || !c.needOut(2, kv) || c.validating)
    return c.error.empty();
  cpu::attentionGrad(a, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fout(0), c.fout(1), c.fout(2));
  return true;
}

bool run(KernelCall &c, const catalogue::AttentionBlock &p) {
  cpu::RingBlockArgs r;
  if (!ringBlockArgs(c, p, r) || !needRingOperands(c, r, false) || c.validating)
    return c.error.empty();
  cpu::attentionBlock(r, c.fin(0), c.fin(1), c.fin(2), p.step == 0, c.fout(0), c.fout(1));
  return true;
}

bool run(KernelCall &c, const catalogue::AttentionBlockGrad &p) {
  cpu::RingBlockArgs r;
  if (!ringBlockArgs(c, p, r) || !needRingOperands(c, r, true) || c.validating)
    return c.error.empty();
  cpu::attentionBlockGrad(r, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fin(4), c.fin(5),
                          p.step == 0, c.fout(0), c.fout(1), c.fout(2));
  return true;
}

bool run(KernelCall &c, const catalogue::Rope &p) {
  int64_t batch = p.batch, seq = p.seq, heads = p.heads, head = p.head;
  float theta = static_cast<float>(p.theta);
  bool inverse = p.inverse != 0;
  int64_t n = batch * seq * heads * head;
  if (head % 2 != 0 || n <= 0)
    return c.fail("needs positive sizes and an even head size");
  // Under a sequence group the positions here are a head-tail block of the whole.
  int64_t headStart = -1, tailStart = -1;
  if (!ropePositions(c, p, headStart, tailStart))
    return false;
  if (!c.needIn(0, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::rope(batch, seq, heads, head, theta, inverse, c.fin(0), c.fout(0), headStart, tailStart);
  return true;
}

bool run(KernelCall &c, const catalogue::Accumulate &p) {
  int64_t n = p.n;
  if (!c.needIn(0, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  cpu::Shape shape;
  shape.rank = 1;
  shape.size[0] = n;
  cpu::Strides dense = cpu::denseStrides(shape);
  cpu::binary(cpu::BinaryKind::Add, shape, c.fout(0), dense, c.fin(0), dense, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::GlobalNorm &p) {
  if (!c.needOut(0, 1) || c.validating)
    return c.error.empty();
  double sum = 0;
  for (size_t k = 0; k < c.in.size(); ++k)
    sum += cpu::sumOfSquares(static_cast<int64_t>(c.inElements[k]), c.fin(k));
  c.fout(0)[0] = static_cast<float>(std::sqrt(sum));
  return true;
}

bool run(KernelCall &c, const catalogue::SumSquares &p) {
  if (c.in.empty())
    return c.fail("needs at least one input");
  if (!c.needOut(0, 1) || c.validating)
    return c.error.empty();
  // In input order, each input's sum in double: the same bits however the plan is run.
  double sum = 0;
  for (size_t k = 0; k < c.in.size(); ++k)
    sum += cpu::sumOfSquares(static_cast<int64_t>(c.inElements[k]), c.fin(k));
  c.fout(0)[0] = static_cast<float>(sum);
  return true;
}

bool run(KernelCall &c, const catalogue::Pack &p) {
  std::vector<const float *> inputs;
  if (!packInputs(c, p, inputs))
    return c.error.empty();
  cpu::pack(static_cast<int64_t>(inputs.size()), inputs.data(), p.outers.data(), p.chunks.data(),
            p.ways, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::ShardSlice &p) {
  int64_t outer = p.outer, chunk = p.chunk;
  const CommGroup *g = c.group(p.group);
  if (!g)
    return false;
  if (outer <= 0 || chunk <= 0)
    return c.fail("has a non-positive outer or chunk size");
  const int64_t ways = g->size();
  if (!c.needIn(0, outer * ways * chunk) || !c.needOut(0, outer * chunk) || c.validating)
    return c.error.empty();
  cpu::Shape shape;
  cpu::Strides x;
  int64_t offset = 0;
  if (!shardSliceView(c, p, *g, shape, x, offset))
    return false;
  cpu::stridedCopy(shape, c.fin(0) + offset, x, c.fout(0));
  return true;
}

bool run(KernelCall &c, const catalogue::GuardFinite &) {
  if (c.validating)
    return true;
  for (size_t k = 0; k < c.in.size() && !c.stop; ++k) {
    const float *x = c.fin(k);
    for (uint64_t e = 0; e < c.inElements[k]; ++e)
      if (!std::isfinite(x[e])) {
        c.stop = true;
        break;
      }
  }
  return true;
}

bool run(KernelCall &c, const catalogue::ClipCoefficient &p) {
  float max = static_cast<float>(p.max);
  if (!c.needIn(0, 1) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  // As torch.nn.utils.clip_grad_norm_: max / (norm + 1e-6), clamped at 1, in f32.
  float coefficient = max / (c.fin(0)[0] + 1e-6f);
  c.fout(0)[0] = std::min(coefficient, 1.0f);
  return true;
}

bool run(KernelCall &c, const catalogue::LearningRate &p) {
  if (!c.needOut(0, 1) || c.validating)
    return c.error.empty();
  c.fout(0)[0] = static_cast<float>(scheduledLearningRate(p, c.ctx->step));
  return true;
}

bool run(KernelCall &c, const catalogue::AdamW &p) {
  // Tensor t of k: grad[t], then lr and c; param[t], m[t], v[t] and working[t].
  const size_t k = p.n.size();
  bool working = false;
  if (!c.needTensors(p.n, 1, 3, 1, &working) || c.validating)
    return c.error.empty();
  cpu::AdamWArgs a;
  a.beta1 = static_cast<float>(p.beta1);
  a.beta2 = static_cast<float>(p.beta2);
  a.eps = static_cast<float>(p.eps);
  a.weightDecay = static_cast<float>(p.weight_decay);
  a.lr = c.fin(k)[0];
  a.gradScale = c.fin(k + 1)[0];
  a.step = c.ctx->step;
  std::vector<cpu::AdamWTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {p.n[t], c.fout(t), c.fin(t), c.fout(k + t), c.fout(2 * k + t)};
  cpu::adamw(a, tensors.data(), k);
  // A 16-bit working copy is f32 scratch here, which the widening wrapper rounds.
  if (working)
    for (size_t t = 0; t < k; ++t)
      std::memcpy(c.fout(3 * k + t), c.fout(t), static_cast<size_t>(p.n[t]) * sizeof(float));
  return true;
}

bool run(KernelCall &c, const catalogue::Sgd &p) {
  // Tensor t of k: grad[t], then lr and c; param[t] and momentum[t].
  const size_t k = p.n.size();
  if (!c.needTensors(p.n, 1, 2) || c.validating)
    return c.error.empty();
  cpu::SgdArgs a;
  a.lr = c.fin(k)[0];
  a.gradScale = c.fin(k + 1)[0];
  a.momentum = static_cast<float>(p.momentum);
  a.weightDecay = static_cast<float>(p.weight_decay);
  std::vector<cpu::SgdTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {p.n[t], c.fout(t), c.fin(t), c.fout(k + t)};
  cpu::sgd(a, tensors.data(), k);
  return true;
}

/// Calls the handler of the kernel whose parameters are P.
template <class P> bool dispatch(KernelCall &c, const catalogue::KernelParams &params) {
  return run(c, *std::get_if<P>(&params));
}

} // namespace

KernelFn cpuKernel(catalogue::KernelId id) {
  // Every kernel of the catalogue has a handler here: one missing fails to compile.
  static const KernelFn table[] = {
#define TESSEL_KERNEL(Id, Name, Family, Doc) &dispatch<catalogue::Id>,
#include "common/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  return table[static_cast<size_t>(id)];
}

} // namespace tessel::rt
