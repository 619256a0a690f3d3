//===- AttentionPatterns.cpp - Attention and RoPE to plan kernels ---------===//
//
// Attention's kernels take q, k, v as [..., seq, heads, head] with any leading dims folded
// into a batch; the key's seq and heads may differ from the query's (keys gathered over cp,
// grouped-query heads).
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// The parameters the attention and attention_grad kernels share.
template <typename OpTy> SmallVector<NamedAttribute> attentionParams(OpTy op, PlanEmitter &emit) {
  NamedShape qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  size_t r = qs.size();
  SmallVector<NamedAttribute> params{
      emit.i64("batch", numElements(qs) / (qs[r - 3].size * qs[r - 2].size * qs[r - 1].size)),
      emit.i64("seq", qs[r - 3].size),
      emit.i64("heads", qs[r - 2].size),
      emit.i64("kv_seq", ks[r - 3].size),
      emit.i64("kv_heads", ks[r - 2].size),
      emit.i64("head", qs[r - 1].size),
      emit.i64("causal", op.getCausal()),
      emit.f64("scale", op.getScale().convertToDouble())};
  if (std::optional<uint64_t> window = op.getWindow())
    params.push_back(emit.i64("window", static_cast<int64_t>(*window)));
  if (std::optional<StringRef> headsOver = op.getHeadsOver())
    params.push_back(emit.str("head_group", *headsOver));
  return params;
}

struct AttentionPattern : PlanPattern<graph::AttentionOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::AttentionOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("attention", {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()}, {r},
                attentionParams(op, emit));
    return success();
  }
};

struct AttentionGradPattern : PlanPattern<graph::AttentionGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::AttentionGradOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    Value dq = emit.define(op.getQueryGrad()), dk = emit.define(op.getKeyGrad()),
          dv = emit.define(op.getValueGrad());
    emit.kernel("attention_grad",
                {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(), adaptor.getGrad()},
                {dq, dk, dv}, attentionParams(op, emit));
    return success();
  }
};

struct RopePattern : PlanPattern<graph::RopeOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RopeOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape s = shapeOf(op.getInput());
    size_t r = s.size();
    Value y = emit.define(op.getResult());
    emit.kernel(
        "rope", {adaptor.getInput()}, {y},
        {emit.i64("batch", numElements(s) / (s[r - 3].size * s[r - 2].size * s[r - 1].size)),
         emit.i64("seq", s[r - 3].size), emit.i64("heads", s[r - 2].size),
         emit.i64("head", s[r - 1].size), emit.f64("theta", op.getTheta().convertToDouble()),
         emit.i64("inverse", op.getInverse())});
    return success();
  }
};

} // namespace

void plan_lowering::populateAttentionPatterns(RewritePatternSet &patterns,
                                              const TypeConverter &converter,
                                              PlanLowering &lowering) {
  patterns.add<AttentionPattern, AttentionGradPattern, RopePattern>(
      converter, patterns.getContext(), lowering);
}
