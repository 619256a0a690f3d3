//===- ElementwisePatterns.cpp - Elementwise ops to plan kernels ----------===//
//
// Binary ops and comparisons read their operands through strides over the result's dims
// (0 for a broadcast dim); unary ops run over dense buffers of one shape.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// add, sub, mul, div and the comparisons: the `binary` kernel, named by the op.
template <typename OpTy> struct BinaryPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape out = shapeOf(op.getResult());
    Value r = emit.define(op.getResult());
    emit.kernel("binary", {adaptor.getLhs(), adaptor.getRhs()}, {r},
                {emit.str("op", op->getName().stripDialect()), emit.list("shape", sizesOf(out)),
                 emit.list("a_strides", stridesIn(shapeOf(op.getLhs()), out)),
                 emit.list("b_strides", stridesIn(shapeOf(op.getRhs()), out))});
    return success();
  }
};

/// The parameters `unary` and `unary_grad` share: the function's catalogue word, the element
/// count and pow's exponent.
template <typename OpTy> SmallVector<NamedAttribute> unaryParams(OpTy op, PlanEmitter &emit) {
  SmallVector<NamedAttribute> params = {emit.str("op", catalogue::wordOf(op.getFn())),
                                        emit.i64("n", numElements(shapeOf(op.getResult())))};
  if (std::optional<APFloat> e = op.getExponent())
    params.push_back(emit.f64("exponent", e->convertToDouble()));
  return params;
}

/// Every elementwise function: the `unary` kernel, named by the function's catalogue word.
struct UnaryPattern : PlanPattern<graph::UnaryOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::UnaryOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("unary", {adaptor.getInput()}, {r}, unaryParams(op, emit));
    return success();
  }
};

struct UnaryGradPattern : PlanPattern<graph::UnaryGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::UnaryGradOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("unary_grad", {adaptor.getInput(), adaptor.getOutput(), adaptor.getGrad()}, {r},
                unaryParams(op, emit));
    return success();
  }
};

struct WherePattern : PlanPattern<graph::WhereOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::WhereOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape out = shapeOf(op.getResult());
    Value r = emit.define(op.getResult());
    emit.kernel("where", {adaptor.getCond(), adaptor.getLhs(), adaptor.getRhs()}, {r},
                {emit.list("shape", sizesOf(out)),
                 emit.list("cond_strides", stridesIn(shapeOf(op.getCond()), out)),
                 emit.list("a_strides", stridesIn(shapeOf(op.getLhs()), out)),
                 emit.list("b_strides", stridesIn(shapeOf(op.getRhs()), out))});
    return success();
  }
};

/// A fused group: inputs are read through strides over the results' dims, as `binary` reads
/// its operands; the results are dense.
struct FusedElementwisePattern : PlanPattern<graph::FusedElementwiseOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::FusedElementwiseOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    NamedShape out = shapeOf(op.getResult(0));
    SmallVector<int64_t> strides;
    for (Value v : op.getInputs())
      llvm::append_range(strides, stridesIn(shapeOf(v), out));
    SmallVector<Value> outs;
    for (Value r : op.getResults())
      outs.push_back(emit.define(r));
    emit.kernel("fused_elementwise", buffers(adaptor.getInputs()), outs,
                {emit.str("body", op.getBody()), emit.list("outputs", op.getOutputs()),
                 emit.list("shape", sizesOf(out)), emit.list("x_strides", strides)});
    return success();
  }
};

struct ConstantPattern : PlanPattern<graph::ConstantOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::ConstantOp op, Adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("fill", {}, {r},
                {emit.f64("value", op.getValue().convertToDouble()),
                 emit.i64("n", numElements(shapeOf(op.getResult())))});
    return success();
  }
};

struct PositionsPattern : PlanPattern<graph::PositionsOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::PositionsOp op, Adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("positions", {}, {r}, {emit.i64("n", numElements(shapeOf(op.getResult())))});
    return success();
  }
};

/// The kernel finds each element's place in the whole step batch (see plan-format.md), so
/// every layout draws the same mask.
struct DropoutPattern : PlanPattern<graph::DropoutOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::DropoutOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape shape = shapeOf(op.getResult());
    graph::Sharding s =
        graph::recordedSharding(op.getResult()).value_or(graph::Sharding::replicated(shape.size()));
    Value r = emit.define(op.getResult());
    emit.kernel(
        "dropout", {adaptor.getInput()}, {r},
        {emit.f64("rate", op.getRate().convertToDouble()),
         emit.i64("mask", op.getMask().value_or(0)), emit.list("shape", sizesOf(shape)),
         emit.str("groups", llvm::join(s.axes, ",")),
         emit.i64("batch_dim", findDim(shape, "batch")),
         emit.i64("micro_batches", settings::trainOf(lowering.module()).getAccumulation())});
    return success();
  }
};

} // namespace

void plan_lowering::populateElementwisePatterns(RewritePatternSet &patterns,
                                                const TypeConverter &converter,
                                                PlanLowering &lowering) {
  patterns
      .add<BinaryPattern<graph::AddOp>, BinaryPattern<graph::SubOp>, BinaryPattern<graph::MulOp>,
           BinaryPattern<graph::DivOp>, BinaryPattern<graph::LtOp>, BinaryPattern<graph::LeOp>,
           BinaryPattern<graph::GtOp>, BinaryPattern<graph::GeOp>, BinaryPattern<graph::EqOp>,
           BinaryPattern<graph::NeOp>, UnaryPattern, UnaryGradPattern, WherePattern,
           FusedElementwisePattern, ConstantPattern, PositionsPattern, DropoutPattern>(
          converter, patterns.getContext(), lowering);
}
