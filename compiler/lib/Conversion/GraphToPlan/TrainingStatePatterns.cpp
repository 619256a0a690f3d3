//===- TrainingStatePatterns.cpp - Parameters, gradients, optimizer -------===//
//
// Parameters, gradient accumulators and optimizer moments are state: buffers that outlive a
// program, declared once (plan.tensor) by the first program that uses them and read or
// written through plan.state. Parameters are declared by the programs that read them, so
// forward_backward (which reads all of them) is lowered before optimizer_step.
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

struct ParamPattern : PlanPattern<graph::ParamOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::ParamOp op, Adaptor, PlanEmitter &emit) const override {
    emit.bind(op.getResult(), lowering.paramState(emit, op));
    return success();
  }
};

/// A decode program's key or value cache: state that no checkpoint holds.
struct KvCachePattern : PlanPattern<graph::KvCacheOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::KvCacheOp op, Adaptor, PlanEmitter &emit) const override {
    emit.bind(op.getResult(), lowering.cacheState(emit, op));
    return success();
  }
};

/// A decode program's running totals: state that no checkpoint holds.
struct RunningTotalsPattern : PlanPattern<graph::RunningTotalsOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::RunningTotalsOp op, Adaptor, PlanEmitter &emit) const override {
    emit.bind(op.getResult(), lowering.totalsState(emit, op));
    return success();
  }
};

struct AssignParamPattern : PlanPattern<graph::AssignParamOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::AssignParamOp op, Adaptor adaptor, PlanEmitter &emit) const override {
    NamedShape shape = shapeOf(op.getValue());
    Value p = emit.state(op.getName(), op.getValue().getType());
    emit.kernel("copy", {adaptor.getValue()}, {p},
                {emit.list("shape", sizesOf(shape)), emit.list("x_strides", denseStrides(shape))});
    return success();
  }
};

struct GradPattern : PlanPattern<graph::GradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::GradOp op, Adaptor, PlanEmitter &emit) const override {
    emit.bind(op.getResult(), lowering.derivedState(emit, "grad", op.getName(), op.getType()));
    return success();
  }
};

struct AccumulateGradPattern : PlanPattern<graph::AccumulateGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::AccumulateGradOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    Value acc = lowering.derivedState(emit, "grad", op.getName(), op.getGrad().getType());
    emit.kernel("accumulate", {adaptor.getGrad()}, {acc},
                {emit.i64("n", numElements(shapeOf(op.getGrad())))});
    return success();
  }
};

struct ZeroGradPattern : PlanPattern<graph::ZeroGradOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::ZeroGradOp op, Adaptor, PlanEmitter &emit) const override {
    const StateDecl *grad = lowering.findState(("grad." + op.getName()).str());
    if (!grad)
      return op.emitOpError("clears a gradient that nothing accumulates");
    Type t = grad->tensor;
    Value acc = lowering.derivedState(emit, "grad", op.getName(), t);
    emit.kernel("fill", {}, {acc},
                {emit.f64("value", 0.0), emit.i64("n", numElements(*graph::getNamedShape(t)))});
    return success();
  }
};

/// global_norm and sum_squares: one kernel over all their inputs.
template <typename OpTy> struct NormPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  static constexpr const char *kKernel =
      std::is_same_v<OpTy, graph::GlobalNormOp> ? "global_norm" : "sum_squares";

  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel(kKernel, buffers(adaptor.getInputs()), {r}, {});
    return success();
  }
};

struct GuardFinitePattern : PlanPattern<graph::GuardFiniteOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::GuardFiniteOp, Adaptor adaptor, PlanEmitter &emit) const override {
    emit.kernel("guard_finite", {adaptor.getValue()}, {}, {});
    return success();
  }
};

struct ClipCoefficientPattern : PlanPattern<graph::ClipCoefficientOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::ClipCoefficientOp op, Adaptor adaptor,
                      PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("clip_coefficient", {adaptor.getNorm()}, {r},
                {emit.f64("max", op.getMax().convertToDouble())});
    return success();
  }
};

struct LearningRatePattern : PlanPattern<graph::LearningRateOp> {
  using PlanPattern::PlanPattern;
  LogicalResult lower(graph::LearningRateOp op, Adaptor, PlanEmitter &emit) const override {
    Value r = emit.define(op.getResult());
    emit.kernel("learning_rate", {}, {r},
                {emit.str("schedule", settings::stringifyLrSchedule(op.getSchedule())),
                 emit.f64("lr", op.getLr().convertToDouble()),
                 emit.f64("min_lr", op.getMinLr().convertToDouble()),
                 emit.i64("warmup", static_cast<int64_t>(op.getWarmup())),
                 emit.i64("steps", static_cast<int64_t>(op.getSteps()))});
    return success();
  }
};

/// sgd and adamw update the parameter in place (its state buffer, or the buffer `param`
/// names under ZeRO-3), with their moments as state named after it: one call per tensor,
/// which -tessel-group-optimizer merges into multi-tensor calls.
template <typename OpTy> struct OptimizerPattern : PlanPattern<OpTy> {
  using PlanPattern<OpTy>::PlanPattern;
  static constexpr bool kAdam = std::is_same_v<OpTy, graph::AdamWOp>;

  LogicalResult lower(OpTy op, typename OpTy::Adaptor adaptor, PlanEmitter &emit) const override {
    Type t = op.getGrad().getType();
    if (!this->lowering.findState(op.getName()))
      return op.emitOpError() << "updates '" << op.getName()
                              << "', which no lowered function declares as a parameter";
    Value p = adaptor.getParam() ? adaptor.getParam() : emit.state(op.getName(), t);
    if (op.getUpdated())
      emit.bind(op.getUpdated(), p);
    int64_t n = numElements(shapeOf(op.getGrad()));
    SmallVector<Value> ins = {adaptor.getGrad(), adaptor.getLr(), adaptor.getCoefficient()};
    if constexpr (kAdam) {
      Value m = this->lowering.derivedState(emit, "adam_m", op.getName(), t);
      Value v = this->lowering.derivedState(emit, "adam_v", op.getName(), t);
      emit.kernel("adamw", ins, {p, m, v},
                  {emit.list("n", {n}), emit.f64("beta1", op.getBeta1().convertToDouble()),
                   emit.f64("beta2", op.getBeta2().convertToDouble()),
                   emit.f64("eps", op.getEps().convertToDouble()),
                   emit.f64("weight_decay", op.getWeightDecay().convertToDouble())});
    } else {
      Value momentum = this->lowering.derivedState(emit, "momentum", op.getName(), t);
      emit.kernel("sgd", ins, {p, momentum},
                  {emit.list("n", {n}), emit.f64("momentum", op.getMomentum().convertToDouble()),
                   emit.f64("weight_decay", op.getWeightDecay().convertToDouble())});
    }
    return success();
  }
};

} // namespace

void plan_lowering::populateTrainingStatePatterns(RewritePatternSet &patterns,
                                                  const TypeConverter &converter,
                                                  PlanLowering &lowering) {
  patterns.add<ParamPattern, KvCachePattern, RunningTotalsPattern, AssignParamPattern,
               GradPattern, AccumulateGradPattern, ZeroGradPattern,
               NormPattern<graph::GlobalNormOp>, NormPattern<graph::SumSquaresOp>,
               GuardFinitePattern, ClipCoefficientPattern, LearningRatePattern,
               OptimizerPattern<graph::SGDOp>, OptimizerPattern<graph::AdamWOp>>(
      converter, patterns.getContext(), lowering);
}
