//===- SaveAttentionStatistics.cpp - Attention's log-sum-exp for its gradient ===//
//
// Attention's backward pass needs the probabilities again, and each query row's sum of p · dp.
// From the queries and keys alone that takes the forward pass a second time (the row's maximum
// and sum, then the output), which on a GPU costs as much as the forward call itself. The
// forward call knows both when it finishes: its log-sum-exp gives the probabilities back in one
// exponential each, and Σ p · dp = Σ dout · out. So each attention whose gradient is in the
// same function keeps its log-sum-exp (one f32 per query row and head), and the gradient reads
// it with the output, as FlashAttention's backward pass does.
//
// The pairing is by identity: the gradient that autodiff built reads the very query, key and
// value values of its attention, with the same options. It runs after partitioning (both ops
// are per-rank already, with the same heads_over and seq_over) and before recomputation,
// which then keeps or recomputes the two results together.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_SAVEATTENTIONSTATISTICS
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

/// Whether `a` is the forward call whose gradient `g` is: the same operands and options.
bool isForwardOf(AttentionOp a, AttentionGradOp g) {
  return a.getQuery() == g.getQuery() && a.getKey() == g.getKey() && a.getValue() == g.getValue() &&
         a.getCausal() == g.getCausal() && a.getScaleAttr() == g.getScaleAttr() &&
         a.getWindow() == g.getWindow() && a.getHeadsOver() == g.getHeadsOver() &&
         a.getSeqOver() == g.getSeqOver() && a->getBlock() == g->getBlock() &&
         a->isBeforeInBlock(g);
}

/// The f32 tensor of one value per query row: the query's dims without `head`.
RankedTensorType lseType(Value query) {
  auto q = cast<RankedTensorType>(query.getType());
  NamedShape dims = *getNamedShape(q);
  dims.pop_back();
  return getNamedTensorType(q.getContext(), dims, Float32Type::get(q.getContext()));
}

/// `a` again with its log-sum-exp as a second result, its sharding recorded as the output's
/// without `head`.
AttentionOp withLse(AttentionOp a) {
  OpBuilder b(a);
  auto kept = AttentionOp::create(b, a.getLoc(), a.getResult().getType(), lseType(a.getQuery()),
                                  a.getQuery(), a.getKey(), a.getValue(), a.getCausalAttr(),
                                  a.getScaleAttr(), a.getWindowAttr(), a.getHeadsOverAttr(),
                                  a.getSeqOverAttr());
  kept->setDiscardableAttrs(a->getDiscardableAttrDictionary());
  if (std::optional<Sharding> out = recordedSharding(a.getResult())) {
    Sharding lse = *out;
    lse.axes.pop_back();
    kept->setAttr(kShardingAttr, b.getArrayAttr({getShardingAttr(b.getContext(), *out),
                                                 getShardingAttr(b.getContext(), lse)}));
  }
  a.getResult().replaceAllUsesWith(kept.getResult());
  a->erase();
  return kept;
}

struct SaveAttentionStatistics
    : tessel::impl::SaveAttentionStatisticsBase<SaveAttentionStatistics> {
  void runOnOperation() override {
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](AttentionGradOp g) {
      if (!g.getOut())
        grads.push_back(g);
    });
    for (AttentionGradOp g : grads) {
      AttentionOp forward;
      for (Operation *user : g.getQuery().getUsers())
        if (auto a = dyn_cast<AttentionOp>(user); a && isForwardOf(a, g))
          forward = a;
      if (!forward)
        continue;
      if (!forward.getLse())
        forward = withLse(forward);
      OpBuilder b(g);
      auto saved = AttentionGradOp::create(
          b, g.getLoc(), g.getResultTypes(), g.getQuery(), g.getKey(), g.getValue(), g.getGrad(),
          forward.getResult(), forward.getLse(), g.getCausalAttr(), g.getScaleAttr(),
          g.getWindowAttr(), g.getHeadsOverAttr(), g.getSeqOverAttr());
      saved->setDiscardableAttrs(g->getDiscardableAttrDictionary());
      g->replaceAllUsesWith(saved);
      g->erase();
    }
  }
};

} // namespace
