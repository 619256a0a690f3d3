//===- NormalizationPatterns.cpp - Softmax and norms to plan kernels ------===//
//
// These kernels work along trailing dims of [rows, cols] buffers: softmax along its dim,
// the norms along the dims of their scale. PlanEmitter::alongDims moves those dims innermost
// when they are not.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// The dims a norm works along: those of its scale.
std::vector<std::string> dimNames(Value scale) {
  std::vector<std::string> names;
  for (const NamedDim &d : shapeOf(scale))
    names.push_back(d.name);
  return names;
}

struct SoftmaxPattern : PlanPattern<graph::SoftmaxOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::SoftmaxOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("softmax", shapeOf(op.getInput()), {op.getDim().str()},
                          adaptor.getOperands(), {true}, op->getResults(), {true}, {});
  }
};

struct TopKPattern : PlanPattern<graph::TopKOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::TopKOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("top_k_mask", shapeOf(op.getInput()), {op.getDim().str()},
                          adaptor.getOperands(), {true}, op->getResults(), {true},
                          {emit.i64("k", op.getK())});
  }
};

struct SoftmaxGradPattern : PlanPattern<graph::SoftmaxGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::SoftmaxGradOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("softmax_grad", shapeOf(op.getOutput()), {op.getDim().str()},
                          {adaptor.getOutput(), adaptor.getGrad()}, {true, true}, op->getResults(),
                          {true}, {});
  }
};

struct LayerNormPattern : PlanPattern<graph::LayerNormOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::LayerNormOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("layernorm", shapeOf(op.getInput()), dimNames(op.getScale()),
                          adaptor.getOperands(), {true, false, false}, op->getResults(), {true},
                          {emit.f64("eps", op.getEps().convertToDouble())});
  }
};

struct LayerNormGradPattern : PlanPattern<graph::LayerNormGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::LayerNormGradOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    return emit.alongDims("layernorm_grad", shapeOf(op.getInput()), dimNames(op.getScale()),
                          adaptor.getOperands(), {true, false, true}, op->getResults(),
                          {true, false, false}, {emit.f64("eps", op.getEps().convertToDouble())});
  }
};

struct RMSNormPattern : PlanPattern<graph::RMSNormOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RMSNormOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("rmsnorm", shapeOf(op.getInput()), dimNames(op.getScale()),
                          adaptor.getOperands(), {true, false}, op->getResults(), {true},
                          {emit.f64("eps", op.getEps().convertToDouble())});
  }
};

struct RMSNormGradPattern : PlanPattern<graph::RMSNormGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RMSNormGradOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    return emit.alongDims("rmsnorm_grad", shapeOf(op.getInput()), dimNames(op.getScale()),
                          adaptor.getOperands(), {true, false, true}, op->getResults(),
                          {true, false}, {emit.f64("eps", op.getEps().convertToDouble())});
  }
};

} // namespace

void plan_lowering::populateNormalizationPatterns(RewritePatternSet &patterns,
                                                  const TypeConverter &converter,
                                                  PlanLowering &lowering) {
  patterns.add<SoftmaxPattern, SoftmaxGradPattern, TopKPattern, LayerNormPattern, LayerNormGradPattern,
               RMSNormPattern, RMSNormGradPattern>(converter, patterns.getContext(), lowering);
}
