//===- LossPatterns.cpp - Cross-entropy to plan kernels -------------------===//
//
// Whole cross-entropy is one kernel along the vocabulary dim, forward and gradient. Under
// vocabulary parallelism the partition pass splits it into ce_max, ce_sums, ce_loss and
// ce_grad, whose kernels reduce over the vocabulary's group (`col_group`).
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// cross_entropy and cross_entropy_grad. The kernel reads targets in the order of the
/// logits' other dims.
template <typename OpTy> struct CrossEntropyPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  static constexpr bool kGrad = std::is_same_v<OpTy, graph::CrossEntropyGradOp>;

  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape ls = shapeOf(op.getLogits()), ts = shapeOf(op.getTargets());
    std::string dim = op.getDim().str();
    NamedShape others = without(ls, {dim});
    if (!(others == ts))
      return op.emitOpError() << "targets " << formatShape(ts)
                              << " must list the logits' other dims in their order "
                              << formatShape(others) << " for the CPU lowering";
    SmallVector<bool> rowIns = {true, false};
    if (kGrad)
      rowIns.push_back(false);
    SmallVector<NamedAttribute> params;
    if (std::optional<APFloat> scale = op.getScale())
      params.push_back(emit.f64("scale", scale->convertToDouble()));
    return emit.alongDims(kGrad ? "cross_entropy_grad" : "cross_entropy", ls, {dim},
                          adaptor.getOperands(), rowIns, op->getResults(), {kGrad}, params);
  }
};

struct CEMaxPattern : PlanPattern<graph::CEMaxOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::CEMaxOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("ce_max", shapeOf(op.getLogits()), {op.getDim().str()},
                          {adaptor.getLogits()}, {true}, op->getResults(), {false}, {});
  }
};

struct CESumsPattern : PlanPattern<graph::CESumsOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::CESumsOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("ce_sums", shapeOf(op.getLogits()), {op.getDim().str()},
                          adaptor.getOperands(), {true, false, false}, op->getResults(),
                          {false, false}, {emit.str("col_group", op.getAxis())});
  }
};

struct CELossPattern : PlanPattern<graph::CELossOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::CELossOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("ce_loss", {adaptor.getMax(), adaptor.getSums(), adaptor.getPicked()}, {r},
                {emit.i64("rows", numElements(shapeOf(op.getMax()))),
                 emit.f64("scale", op.getScale().convertToDouble())});
    return success();
  }
};

struct CEGradPattern : PlanPattern<graph::CEGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::CEGradOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims(
        "ce_grad", shapeOf(op.getLogits()), {op.getDim().str()}, adaptor.getOperands(),
        {true, false, false, false, false}, op->getResults(), {true},
        {emit.str("col_group", op.getAxis()), emit.f64("scale", op.getScale().convertToDouble())});
  }
};

} // namespace

void plan_lowering::populateLossPatterns(RewritePatternSet &patterns,
                                         const TypeConverter &converter, PlanLowering &lowering) {
  patterns.add<CrossEntropyPattern<graph::CrossEntropyOp>,
               CrossEntropyPattern<graph::CrossEntropyGradOp>, CEMaxPattern, CESumsPattern,
               CELossPattern, CEGradPattern>(converter, patterns.getContext(), lowering);
}
