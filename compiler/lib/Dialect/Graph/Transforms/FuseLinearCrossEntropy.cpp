//===- FuseLinearCrossEntropy.cpp - The output head and its loss as one op -===//
//
// A language model ends `logits = x @ w; loss = cross_entropy(logits, targets)`. At a real
// vocabulary the [tokens, vocab] logits and their gradient are the largest activations of the
// step (GPT-2: 50k classes against 768 channels). This pass replaces the head contraction, the
// cross-entropy ops that read its result and, in training, the two contractions that read the
// logits' gradient, by one op that the plan computes a chunk of rows at a time: only a chunk
// of logits ever exists (Liger-Kernel's fused linear cross-entropy).
//
// It runs where ops are per-rank and final, so it sees cross-entropy in both of its forms:
// whole (`graph.cross_entropy`, `graph.cross_entropy_grad`) and over a vocabulary split by the
// partition pass (`graph.ce_max`, the max all-reduce, `graph.ce_sums`, the sum all-reduces,
// `graph.ce_loss`, `graph.ce_grad`), whose collectives the fused op then runs per chunk. The
// gradient of the logits is only a gradient of x and w once both contractions that read it
// are absorbed, so a match needs every op it removes to be read only inside the match.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/MathExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPY
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

NamedShape shapeOf(Value v) { return *graph::getNamedShape(v.getType()); }

int64_t numElements(Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); }

std::vector<std::string> sumOf(graph::ContractOp c) {
  std::vector<std::string> out;
  for (Attribute a : c.getSum())
    out.push_back(cast<StringAttr>(a).str());
  return out;
}

/// The operand of the two-operand op `op` that is not `v`, or null when neither or both are.
Value otherOperand(Operation *op, Value v) {
  if (op->getNumOperands() != 2 || op->getOperand(0) == op->getOperand(1))
    return {};
  if (op->getOperand(0) == v)
    return op->getOperand(1);
  if (op->getOperand(1) == v)
    return op->getOperand(0);
  return {};
}

/// A head and the cross-entropy that reads it, as found.
struct Match {
  graph::ContractOp head;
  Value input, weight, targets;
  std::string classDim;
  std::optional<std::string> axis; ///< The mesh axis splitting the classes.
  double scale = 0;
  Value loss; ///< The loss the replaced ops computed.
  Operation *lossOp = nullptr;
  Value logitsGrad; ///< The logits' gradient, when computed here.
  Operation *gradOp = nullptr;
  Value lossGrad; ///< The loss gradient it was computed for.
  graph::ContractOp inputGrad, weightGrad;
  /// The backward pass's own gather of the weight (ZeRO-3), which the fused op no longer needs.
  Operation *weightRegather = nullptr;
  llvm::SetVector<Operation *> ops; ///< Every op replaced.
};

/// Matches `head` as x @ w giving logits [rows..., classes], the classes last.
bool matchHead(graph::ContractOp head, Match &m) {
  std::vector<std::string> sum = sumOf(head);
  if (sum.size() != 1)
    return false;
  NamedShape logits = shapeOf(head.getResult());
  if (logits.size() < 2)
    return false;
  for (auto [x, w] :
       {std::pair(head.getLhs(), head.getRhs()), std::pair(head.getRhs(), head.getLhs())}) {
    NamedShape xs = shapeOf(x), ws = shapeOf(w);
    if (ws.size() != 2 || xs.empty() || xs.back().name != sum[0] || findDim(ws, sum[0]) < 0)
      continue;
    NamedShape expect(xs.begin(), xs.end() - 1);
    expect.push_back(ws[1 - findDim(ws, sum[0])]);
    if (!(expect == logits))
      continue;
    m.head = head;
    m.input = x;
    m.weight = w;
    m.classDim = logits.back().name;
    return true;
  }
  return false;
}

/// Whether `a` and `b` hold the same values: one value, or two all-gathers of one value alike
/// (ZeRO-3 gathers a parameter again for the backward pass).
bool sameValue(Value a, Value b) {
  if (a == b)
    return true;
  auto ga = a.getDefiningOp<shard::AllGatherOp>(), gb = b.getDefiningOp<shard::AllGatherOp>();
  return ga && gb && ga->getOperands() == gb->getOperands() && a.getType() == b.getType() &&
         ga->getDiscardableAttrDictionary() == gb->getDiscardableAttrDictionary() &&
         ga.getProperties() == gb.getProperties();
}

/// The only user of `v`, if it is an OpTy.
template <class OpTy> OpTy soleUser(Value v) {
  return v.hasOneUse() ? dyn_cast<OpTy>(*v.getUsers().begin()) : OpTy();
}

/// Every user of `v` is in `ops`.
bool readOnlyBy(Value v, const llvm::SetVector<Operation *> &ops) {
  return llvm::all_of(v.getUsers(), [&](Operation *u) { return ops.contains(u); });
}

/// The whole form: the logits read by one cross_entropy and at most one cross_entropy_grad.
bool matchWholeLoss(Match &m) {
  Value logits = m.head.getResult();
  graph::CrossEntropyOp ce;
  graph::CrossEntropyGradOp grad;
  for (Operation *u : logits.getUsers()) {
    if (auto c = dyn_cast<graph::CrossEntropyOp>(u); c && !ce)
      ce = c;
    else if (auto g = dyn_cast<graph::CrossEntropyGradOp>(u); g && !grad)
      grad = g;
    else
      return false;
  }
  if (!ce || ce.getLogits() != logits || ce.getDim() != m.classDim)
    return false;
  double rows = static_cast<double>(numElements(ce.getTargets()));
  m.scale = ce.getScale() ? ce.getScale()->convertToDouble() : 1.0 / rows;
  m.targets = ce.getTargets();
  m.loss = ce.getResult();
  m.lossOp = ce;
  m.ops.insert(ce);
  if (grad) {
    double scale = grad.getScale() ? grad.getScale()->convertToDouble() : 1.0 / rows;
    if (grad.getLogits() != logits || grad.getTargets() != m.targets || scale != m.scale)
      return false;
    m.logitsGrad = grad.getResult();
    m.gradOp = grad;
    m.lossGrad = grad.getGrad();
    m.ops.insert(grad);
  }
  return true;
}

/// The split form: ce_max, its max all-reduce, ce_sums, its two sum all-reduces, ce_loss and
/// at most one ce_grad, all over the same axis and reading one another's reduced values.
bool matchSplitLoss(Match &m) {
  Value logits = m.head.getResult();
  graph::CEMaxOp max;
  graph::CESumsOp sums;
  graph::CEGradOp grad;
  for (Operation *u : logits.getUsers()) {
    if (auto o = dyn_cast<graph::CEMaxOp>(u); o && !max)
      max = o;
    else if (auto o = dyn_cast<graph::CESumsOp>(u); o && !sums)
      sums = o;
    else if (auto o = dyn_cast<graph::CEGradOp>(u); o && !grad)
      grad = o;
    else
      return false;
  }
  if (!max || !sums || max.getDim() != m.classDim || sums.getDim() != m.classDim ||
      sums.getLogits() != logits || max.getAxis() != sums.getAxis())
    return false;
  auto maxReduced = soleUser<shard::AllReduceOp>(max.getResult());
  auto sumsReduced = soleUser<shard::AllReduceOp>(sums.getSums());
  auto pickedReduced = soleUser<shard::AllReduceOp>(sums.getPicked());
  if (!maxReduced || maxReduced.getReduction() != shard::ReductionKind::Max || !sumsReduced ||
      sumsReduced.getReduction() != shard::ReductionKind::Sum || !pickedReduced ||
      pickedReduced.getReduction() != shard::ReductionKind::Sum ||
      sums.getMax() != maxReduced.getResult())
    return false;
  auto loss = soleUser<graph::CELossOp>(pickedReduced.getResult());
  if (!loss || loss.getMax() != maxReduced.getResult() || loss.getSums() != sumsReduced.getResult())
    return false;
  m.axis = max.getAxis().str();
  m.scale = loss.getScale().convertToDouble();
  m.targets = sums.getTargets();
  m.loss = loss.getResult();
  m.lossOp = loss;
  m.ops.insert(max);
  m.ops.insert(maxReduced);
  m.ops.insert(sums);
  m.ops.insert(sumsReduced);
  m.ops.insert(pickedReduced);
  m.ops.insert(loss);
  if (grad) {
    if (grad.getLogits() != logits || grad.getTargets() != m.targets ||
        grad.getMax() != maxReduced.getResult() || grad.getSums() != sumsReduced.getResult() ||
        grad.getAxis() != max.getAxis() || grad.getScale().convertToDouble() != m.scale)
      return false;
    m.logitsGrad = grad.getResult();
    m.gradOp = grad;
    m.lossGrad = grad.getGrad();
    m.ops.insert(grad);
  }
  // The reduced statistics are read by nothing but the loss and its gradient.
  for (Value v : {maxReduced.getResult(), sumsReduced.getResult()})
    if (!readOnlyBy(v, m.ops))
      return false;
  return true;
}

/// The two contractions that read the logits' gradient: dlogits @ w over the classes (x's
/// gradient, of x's type) and dlogits @ x over the rows (w's gradient, of w's type).
bool matchGradients(Match &m) {
  Value dl = m.logitsGrad;
  if (std::distance(dl.getUses().begin(), dl.getUses().end()) != 2)
    return false;
  std::vector<std::string> rows;
  for (const NamedDim &d : shapeOf(m.targets))
    rows.push_back(d.name);
  llvm::sort(rows);
  for (Operation *u : dl.getUsers()) {
    auto c = dyn_cast<graph::ContractOp>(u);
    if (!c)
      return false;
    Value other = otherOperand(c, dl);
    std::vector<std::string> sum = sumOf(c);
    llvm::sort(sum);
    if (other && sameValue(other, m.weight) && sum == std::vector<std::string>{m.classDim} &&
        c.getType() == m.input.getType() && !m.inputGrad) {
      m.inputGrad = c;
      if (other != m.weight)
        m.weightRegather = other.getDefiningOp();
    } else if (other == m.input && sum == rows && c.getType() == m.weight.getType() &&
               !m.weightGrad)
      m.weightGrad = c;
    else
      return false;
  }
  return m.inputGrad && m.weightGrad;
}

/// Rows per chunk: `chunk` when set, else Liger-Kernel's rule — about as many logits per
/// chunk as the input has elements — raised to at least as many logits as the head's weight
/// has elements (`hidden` rows), a power of two, and at least `minChunk` rows, never more than
/// there are. Every chunk adds its product into the weight's whole f32 gradient, so a chunk of
/// fewer logits than the weight has moves more bytes accumulating than computing (GPT-2 124M
/// on an H200: 64 chunks of 256 rows made the step 14% slower than 8 of 2048).
int64_t chunkRows(Match &m, int64_t chunk, int64_t minChunk) {
  NamedShape xs = shapeOf(m.input);
  int64_t rows = numElements(m.targets), hidden = xs.back().size;
  int64_t classes = shapeOf(m.head.getResult()).back().size;
  if (chunk <= 0) {
    int64_t factor = llvm::divideCeil(classes, hidden);
    int64_t rule = std::max<int64_t>(llvm::divideCeil(rows, factor), hidden);
    chunk = std::max<int64_t>(llvm::PowerOf2Ceil(rule), minChunk);
  }
  return std::clamp<int64_t>(chunk, 1, rows);
}

/// The sharding attribute of `v`'s defining op for `v`, if the partition pass set one.
Attribute shardingOf(Value v) {
  auto r = cast<OpResult>(v);
  auto all = r.getOwner()->getAttrOfType<ArrayAttr>("graph.sharding");
  return all && r.getResultNumber() < all.size() ? all[r.getResultNumber()] : Attribute();
}

void replace(Match &m, int64_t chunk) {
  Operation *at = m.gradOp ? m.gradOp : m.lossOp;
  OpBuilder b(at);
  MLIRContext *ctx = b.getContext();
  Location loc = FusedLoc::get(ctx, {m.lossOp->getLoc(), m.head.getLoc()});
  auto axis = m.axis ? b.getStringAttr(*m.axis) : StringAttr();
  SmallVector<Value> olds = {m.loss};
  Operation *fused;
  if (m.gradOp) {
    olds.push_back(m.inputGrad.getResult());
    olds.push_back(m.weightGrad.getResult());
    fused = graph::LinearCrossEntropyGradOp::create(
        b, loc, m.loss.getType(), m.input.getType(), m.weight.getType(), m.input, m.weight,
        m.targets, m.lossGrad, b.getStringAttr(m.classDim), axis, b.getF64FloatAttr(m.scale),
        b.getI64IntegerAttr(chunk));
  } else {
    fused = graph::LinearCrossEntropyOp::create(
        b, loc, m.loss.getType(), m.input, m.weight, m.targets, b.getStringAttr(m.classDim), axis,
        b.getF64FloatAttr(m.scale), b.getI64IntegerAttr(chunk));
  }
  SmallVector<Attribute> shardings;
  for (Value v : olds)
    if (Attribute s = shardingOf(v))
      shardings.push_back(s);
  if (shardings.size() == olds.size())
    fused->setAttr("graph.sharding", b.getArrayAttr(shardings));
  for (auto [old, now] : llvm::zip(olds, fused->getResults()))
    old.replaceAllUsesWith(now);
  // Erase readers before what they read: in reverse program order.
  SmallVector<Operation *> dead(m.ops.begin(), m.ops.end());
  llvm::sort(dead, [](Operation *a, Operation *b) { return b->isBeforeInBlock(a); });
  for (Operation *op : dead)
    op->erase();
  if (m.weightRegather && m.weightRegather->use_empty())
    m.weightRegather->erase();
}

class FuseLinearCrossEntropyPass
    : public tessel::impl::FuseLinearCrossEntropyBase<FuseLinearCrossEntropyPass> {
public:
  using FuseLinearCrossEntropyBase::FuseLinearCrossEntropyBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      SmallVector<graph::ContractOp> heads(func.getOps<graph::ContractOp>());
      // A match erases contractions after its head (the gradients'), which are not heads then.
      llvm::DenseSet<Operation *> erased;
      for (graph::ContractOp head : heads) {
        if (erased.contains(head))
          continue;
        Match found;
        if (!matchHead(head, found))
          continue;
        Match m = found;
        if (!matchWholeLoss(m) && (m = found, !matchSplitLoss(m)))
          continue;
        m.ops.insert(head);
        if (m.gradOp) {
          if (!matchGradients(m))
            continue;
          m.ops.insert(m.inputGrad);
          m.ops.insert(m.weightGrad);
        }
        // Every value replaced but the loss and the gradients is read only here, and the loss
        // is read only after the fused op's place (it computes the loss where the gradient was).
        Operation *at = m.gradOp ? m.gradOp : m.lossOp;
        bool closed = llvm::all_of(m.ops, [&](Operation *op) {
          return llvm::all_of(op->getResults(), [&](Value r) {
            return r == m.loss || (m.inputGrad && r == m.inputGrad.getResult()) ||
                   (m.weightGrad && r == m.weightGrad.getResult()) || readOnlyBy(r, m.ops);
          });
        });
        bool lossAfter = llvm::all_of(m.loss.getUsers(), [&](Operation *u) {
          return u->getBlock() == at->getBlock() && at->isBeforeInBlock(u);
        });
        if (!closed || !lossAfter)
          continue;
        erased.insert(m.ops.begin(), m.ops.end());
        replace(m, chunkRows(m, chunk, minChunk));
      }
    });
  }
};

} // namespace
