//===- BuildOptimizer.cpp - The optimizer step as graph IR ----------------===//

#include "tessel/Dialect/Graph/Transforms/ParameterClasses.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_BUILDOPTIMIZER
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

struct BuildOptimizer : tessel::impl::BuildOptimizerBase<BuildOptimizer> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fb = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!fb) {
      module.emitError("has no @forward_backward; run -tessel-autodiff first");
      return signalPassFailure();
    }
    settings::TrainAttr train = settings::trainOf(module);
    settings::OptimizerAttr opt = train.getOptimizer();
    settings::LearningRateAttr schedule = train.getLrSchedule();
    // Adam without weight decay is AdamW without weight decay (the settings refuse Adam with
    // weight decay).
    bool adamw = opt.getKind() != settings::OptimizerKind::Sgd;
    auto f64 = [&](const APFloat &value) {
      return FloatAttr::get(Float64Type::get(module.getContext()), value);
    };
    SmallVector<AccumulateGradOp> accumulators;
    fb.walk([&](AccumulateGradOp op) { accumulators.push_back(op); });
    if (accumulators.empty()) {
      fb.emitError("accumulates no gradient: no parameter reaches the loss");
      return signalPassFailure();
    }

    MLIRContext *ctx = module.getContext();
    Location loc = fb.getLoc();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(fb);
    auto scalarType = getNamedTensorType(ctx, {}, b.getF32Type());
    auto func = func::FuncOp::create(b, loc, "optimizer_step",
                                     b.getFunctionType({}, {scalarType, scalarType}));
    b.setInsertionPointToStart(func.addEntryBlock());

    SmallVector<Value> grads;
    for (AccumulateGradOp acc : accumulators)
      grads.push_back(GradOp::create(b, acc.getLoc(), acc.getGrad().getType(), acc.getNameAttr()));
    Value norm = GlobalNormOp::create(b, loc, scalarType, grads);
    // A non-finite gradient must not reach the parameters: the step ends before any update
    // and the host, which reads the norm, reports it with the state untouched.
    GuardFiniteOp::create(b, loc, norm);
    Value coefficient =
        !train.getClip().isZero()
            ? ClipCoefficientOp::create(b, loc, scalarType, norm, f64(train.getClip())).getResult()
            : ConstantOp::create(b, loc, scalarType, b.getF64FloatAttr(1.0)).getResult();
    Value lr = LearningRateOp::create(
        b, loc, scalarType, settings::LrScheduleAttr::get(ctx, schedule.getKind()),
        f64(opt.getLr()), f64(schedule.getMinLr()), b.getI64IntegerAttr(schedule.getWarmup()),
        b.getI64IntegerAttr(train.getSteps()));
    // Weight decay falls on the classes of parameter the recipe names (by default the
    // matrices), judged by how @forward uses each one.
    llvm::SmallVector<bool, 4> decayed(4, false);
    for (StringRef word : llvm::split(opt.getDecay(), ',')) {
      if (word.empty())
        continue;
      std::optional<ParameterClass> c = parseParameterClass(word);
      if (!c) {
        module.emitError() << "unknown parameter class '" << word
                           << "' in the optimizer's decay; expected weights, embeddings, gains "
                              "or biases";
        return signalPassFailure();
      }
      decayed[static_cast<size_t>(*c)] = true;
    }
    llvm::StringMap<ParameterClass> classes;
    if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
      classes = classifyParameters(forward);
    for (auto [acc, grad] : llvm::zip(accumulators, grads)) {
      auto found = classes.find(acc.getName());
      // Without @forward (IR written by hand) nothing tells the classes apart: all decay.
      bool decays = found == classes.end() || decayed[static_cast<size_t>(found->second)];
      FloatAttr weightDecay = decays ? f64(opt.getWeightDecay()) : b.getF64FloatAttr(0.0);
      if (adamw)
        AdamWOp::create(b, acc.getLoc(), /*updated=*/Type(), acc.getNameAttr(), grad, lr,
                        coefficient, f64(opt.getBeta1()), f64(opt.getBeta2()), f64(opt.getEps()),
                        weightDecay, /*param=*/Value());
      else
        SGDOp::create(b, acc.getLoc(), /*updated=*/Type(), acc.getNameAttr(), grad, lr, coefficient,
                      f64(opt.getMomentum()), weightDecay, /*param=*/Value());
    }
    for (AccumulateGradOp acc : accumulators)
      ZeroGradOp::create(b, acc.getLoc(), acc.getNameAttr());
    func::ReturnOp::create(b, loc, ValueRange{norm, lr});
  }
};

} // namespace
