//===- RecognizeAttention.cpp - Attention written by hand, as one op ------===//
//
// Scaled dot-product attention written from primitives,
//
//   s = contract(q, k, over = [head]) / sqrt(head)          (or * c, or unscaled)
//   p = softmax(where(positions(seq_k) <= positions(seq), s, -1e30), seq_k)   (mask optional)
//   a = contract(p, v, over = [seq_k])
//
// computes what `graph.attention` computes, whose kernels never hold the seq x seq scores and
// whose backward recomputes them. The pattern becomes that op when the operands are laid out
// as it needs them (q [..., seq, heads, head]; k and v [..., seq_k, heads, head] with the same
// leading dims; the result in q's layout) and the mask, if any, is the causal one. Anything
// else (another mask, dropout on the probabilities, other layouts) is left as written.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"
#include "tessel/Dialect/Graph/IR/GraphSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>

namespace tessel {
#define GEN_PASS_DEF_RECOGNIZEATTENTION
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

/// The value of a scalar constant, if `v` is one.
std::optional<double> scalarConstant(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto shape = getNamedShape(v.getType());
  if (!c || !shape || !shape->empty())
    return std::nullopt;
  return c.getValue().convertToDouble();
}

/// The one dim `positions` ranges over, if `v` is such an op.
std::optional<NamedDim> positionsOf(Value v) {
  if (!v.getDefiningOp<PositionsOp>())
    return std::nullopt;
  auto shape = getNamedShape(v.getType());
  if (!shape || shape->size() != 1)
    return std::nullopt;
  return shape->front();
}

/// Whether `mask` holds exactly where key position <= query position.
bool isCausalMask(Value mask, StringRef queries, StringRef keys) {
  Operation *op = mask.getDefiningOp();
  if (!op || op->getNumOperands() != 2)
    return false;
  auto a = positionsOf(op->getOperand(0)), b = positionsOf(op->getOperand(1));
  if (!a || !b || a->size != b->size)
    return false;
  // key <= query, or query >= key.
  if (isa<LeOp>(op))
    return a->name == keys && b->name == queries;
  if (isa<GeOp>(op))
    return a->name == queries && b->name == keys;
  return false;
}

/// The window W if `term` is (query position - key position) < W, W a positive whole number.
std::optional<int64_t> windowOf(Value term, StringRef queries, StringRef keys) {
  auto lt = term.getDefiningOp<LtOp>();
  auto sub = lt ? lt.getLhs().getDefiningOp<SubOp>() : SubOp();
  std::optional<double> w = lt ? scalarConstant(lt.getRhs()) : std::nullopt;
  if (!sub || !w || !(*w >= 1) || *w != std::floor(*w) || *w > 1e15)
    return std::nullopt;
  auto q = positionsOf(sub.getLhs()), k = positionsOf(sub.getRhs());
  if (!q || !k || q->name != queries || k->name != keys)
    return std::nullopt;
  return static_cast<int64_t>(*w);
}

/// The mask's meaning for attention: causal (window 0), causal with a sliding window W
/// (causal * (q - k < W), either order), or nothing attention can do.
std::optional<int64_t> causalWindowOf(Value mask, StringRef queries, StringRef keys) {
  if (isCausalMask(mask, queries, keys))
    return 0;
  auto mul = mask.getDefiningOp<MulOp>();
  if (!mul)
    return std::nullopt;
  for (auto [a, b] : {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())})
    if (isCausalMask(a, queries, keys))
      if (std::optional<int64_t> w = windowOf(b, queries, keys))
        return w;
  return std::nullopt;
}

/// `op` and the ops its operands come from, each before those it reads (the order in which
/// they can go once unused).
void collectTree(Operation *op, llvm::SetVector<Operation *> &out) {
  if (!op || !out.insert(op))
    return;
  for (Value x : op->getOperands())
    collectTree(x.getDefiningOp(), out);
}

std::optional<std::string> singleSummedDim(ContractOp c) {
  if (c.getSum().size() != 1)
    return std::nullopt;
  return cast<StringAttr>(c.getSum()[0]).str();
}

struct ContractSoftmaxContract : OpRewritePattern<ContractOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ContractOp out, PatternRewriter &rewriter) const override {
    std::optional<std::string> keys = singleSummedDim(out);
    if (!keys)
      return failure();
    // a = contract(p, v) or contract(v, p), p the softmax over the key dim.
    Value p = out.getLhs(), v = out.getRhs();
    if (!p.getDefiningOp<SoftmaxOp>())
      std::swap(p, v);
    auto softmax = p.getDefiningOp<SoftmaxOp>();
    if (!softmax || softmax.getDim() != *keys)
      return rewriter.notifyMatchFailure(out, "not a contraction of a softmax over its dim");
    // The mask, if any: where(causal, s, very negative).
    Value scores = softmax.getInput();
    Value mask;
    if (auto where = scores.getDefiningOp<WhereOp>()) {
      std::optional<double> fill = scalarConstant(where.getRhs());
      if (!fill || *fill > -1e4)
        return rewriter.notifyMatchFailure(out, "the masked scores are not very negative");
      mask = where.getCond();
      scores = where.getLhs();
    }
    // The scale: s / c, s * c or c * s.
    double scale = 1.0;
    if (auto div = scores.getDefiningOp<DivOp>()) {
      std::optional<double> c = scalarConstant(div.getRhs());
      if (!c || !(*c > 0))
        return failure();
      scale = 1.0 / *c;
      scores = div.getLhs();
    } else if (auto mul = scores.getDefiningOp<MulOp>()) {
      Value other = mul.getRhs();
      std::optional<double> c = scalarConstant(mul.getLhs());
      if (c)
        other = mul.getRhs();
      else if ((c = scalarConstant(mul.getRhs())))
        other = mul.getLhs();
      if (!c || !(*c > 0))
        return failure();
      scale = *c;
      scores = other;
    }
    auto qk = scores.getDefiningOp<ContractOp>();
    std::optional<std::string> head = qk ? singleSummedDim(qk) : std::nullopt;
    if (!head)
      return rewriter.notifyMatchFailure(out, "the scores are not a contraction over one dim");
    // k is the operand with the key dim.
    Value q = qk.getLhs(), k = qk.getRhs();
    auto qShape = getNamedShape(q.getType()), kShape = getNamedShape(k.getType());
    if (!qShape || !kShape)
      return failure();
    if (findDim(*qShape, *keys) >= 0) {
      std::swap(q, k);
      std::swap(qShape, kShape);
    }
    auto vShape = getNamedShape(v.getType()), outShape = getNamedShape(out.getType());
    size_t n = qShape->size();
    if (n < 3 || kShape->size() != n || !vShape || !(*vShape == *kShape) || !outShape ||
        !(*outShape == *qShape))
      return rewriter.notifyMatchFailure(out, "operands not laid out as attention needs");
    const NamedDim &queryDim = (*qShape)[n - 3];
    if ((*qShape)[n - 1].name != *head || (*kShape)[n - 1].name != *head ||
        (*kShape)[n - 3].name != *keys || !((*qShape)[n - 2] == (*kShape)[n - 2]))
      return rewriter.notifyMatchFailure(out, "not [..., seq, heads, head] operands");
    for (size_t i = 0; i + 3 < n; ++i)
      if (!((*qShape)[i] == (*kShape)[i]))
        return failure();
    bool causal = false;
    std::optional<int64_t> window;
    if (mask) {
      window = causalWindowOf(mask, queryDim.name, *keys);
      if (!window || queryDim.size != (*kShape)[n - 3].size)
        return rewriter.notifyMatchFailure(out, "a mask other than the causal one or a window");
      causal = true;
    }
    // What the attention op replaces, from the softmax back to the scores: each goes once
    // nothing else reads it (a model may read the scores or the mask elsewhere too).
    llvm::SetVector<Operation *> replaced;
    replaced.insert(softmax);
    for (Operation *op = softmax.getInput().getDefiningOp(); op != qk;
         op = op->getOperand(isa<WhereOp>(op) ? 1 : 0).getDefiningOp()) {
      replaced.insert(op);
      // The where's constant and mask, the scaling's constant.
      for (Value x : op->getOperands())
        if (Operation *d = x.getDefiningOp(); d && d != qk && !isa<ContractOp>(d))
          if (x != scores && !(isa<WhereOp>(op) && x == cast<WhereOp>(op).getLhs()))
            replaced.insert(d);
      if (auto mul = dyn_cast<MulOp>(op); mul && scalarConstant(mul.getLhs()))
        break; // c * s: the scores are the second operand.
    }
    if (mask) {
      replaced.remove(mask.getDefiningOp());
      collectTree(mask.getDefiningOp(), replaced);
    }
    replaced.insert(qk);
    auto attention = rewriter.replaceOpWithNewOp<AttentionOp>(
        out, out.getType(), /*lse=*/Type(), q, k, v, causal ? rewriter.getUnitAttr() : UnitAttr(),
        rewriter.getF64FloatAttr(scale),
        window && *window > 0 ? rewriter.getI64IntegerAttr(*window) : IntegerAttr(),
        /*heads_over=*/StringAttr(), /*seq_over=*/StringAttr());
    if (Attribute layer = out->getAttr("graph.layer"))
      attention->setAttr("graph.layer", layer);
    // Users before what they read: the last in the block first.
    SmallVector<Operation *> gone(replaced.begin(), replaced.end());
    llvm::erase(gone, nullptr);
    llvm::sort(gone, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
    for (Operation *op : gone)
      if (op->use_empty())
        rewriter.eraseOp(op);
    return success();
  }
};

struct RecognizeAttention : tessel::impl::RecognizeAttentionBase<RecognizeAttention> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ContractSoftmaxContract>(&getContext());
    // One walk, no folding and no removal of other unused ops (a parameter nothing reads
    // stays a parameter).
    walkAndApplyPatterns(getOperation(), FrozenRewritePatternSet(std::move(patterns)));
    warnOfHandWrittenAttentionUnderRing();
  }

  /// `context = ring` passes the keys of `graph.attention` around the cp ring; attention left
  /// as written (another mask, a bias on the scores) is partitioned like any contraction, its
  /// keys all-gathered over cp as under `context = allgather`. Says so at each such softmax
  /// over the keys: one over a dim of seq's size that is not seq, beside seq.
  void warnOfHandWrittenAttentionUnderRing() {
    ModuleOp module = getOperation();
    MeshLayout mesh = MeshLayout::fromModule(module);
    if (!mesh.contextRing() || mesh.size("cp") <= 1)
      return;
    module.walk([&](SoftmaxOp op) {
      std::optional<NamedShape> shape = getNamedShape(op.getType());
      if (!shape)
        return;
      const int seq = findDim(*shape, "seq"), keys = findDim(*shape, op.getDim().str());
      if (seq < 0 || keys < 0 || keys == seq || (*shape)[keys].size != (*shape)[seq].size)
        return;
      op.emitWarning() << "context = ring runs attention(...) as ring attention, but this "
                          "attention is written by hand (its mask or scores are not the "
                          "causal attention -tessel-recognize-attention turns into one op), so "
                          "its keys are all-gathered over cp as with context = allgather";
    });
  }
};

} // namespace
