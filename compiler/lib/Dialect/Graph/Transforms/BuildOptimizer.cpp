//===- BuildOptimizer.cpp - The optimizer step as graph IR ----------------===//

#include "tessel/Dialect/Graph/IR/TrainSettings.h"
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
    TrainSettings s = readTrainSettings(module);
    // Adam without weight decay is AdamW without weight decay.
    bool adamw = s.optimizer == "adamw" || (s.optimizer == "adam" && s.weightDecay == 0.0);
    if (s.optimizer == "adam" && !adamw) {
      module.emitError() << "optimizer 'adam' with weight decay (L2, coupled) is not supported "
                            "yet; use adamw, whose decay is decoupled";
      return signalPassFailure();
    }
    if (!adamw && s.optimizer != "sgd") {
      module.emitError() << "unknown optimizer '" << s.optimizer
                         << "'; expected adamw, adam or sgd";
      return signalPassFailure();
    }
    std::optional<LrSchedule> schedule = symbolizeLrSchedule(s.schedule);
    if (!schedule) {
      module.emitError() << "unknown learning-rate schedule '" << s.schedule
                         << "'; expected constant, cosine or linear";
      return signalPassFailure();
    }
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
        s.clip > 0 ? ClipCoefficientOp::create(b, loc, scalarType, norm, b.getF64FloatAttr(s.clip))
                         .getResult()
                   : ConstantOp::create(b, loc, scalarType, b.getF64FloatAttr(1.0)).getResult();
    Value lr = LearningRateOp::create(b, loc, scalarType, LrScheduleAttr::get(ctx, *schedule),
                                      b.getF64FloatAttr(s.lr), b.getF64FloatAttr(s.minLr),
                                      b.getI64IntegerAttr(s.warmup), b.getI64IntegerAttr(s.steps));
    // Weight decay falls on the classes of parameter the recipe names (by default the
    // matrices), judged by how @forward uses each one.
    llvm::SmallVector<bool, 4> decayed(4, false);
    for (StringRef word : llvm::split(s.decay, ',')) {
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
      FloatAttr weightDecay = b.getF64FloatAttr(decays ? s.weightDecay : 0.0);
      if (adamw)
        AdamWOp::create(b, acc.getLoc(), /*updated=*/Type(), acc.getNameAttr(), grad, lr,
                        coefficient, b.getF64FloatAttr(s.beta1), b.getF64FloatAttr(s.beta2),
                        b.getF64FloatAttr(s.eps), weightDecay, /*param=*/Value());
      else
        SGDOp::create(b, acc.getLoc(), /*updated=*/Type(), acc.getNameAttr(), grad, lr, coefficient,
                      b.getF64FloatAttr(s.momentum), weightDecay, /*param=*/Value());
    }
    for (AccumulateGradOp acc : accumulators)
      ZeroGradOp::create(b, acc.getLoc(), acc.getNameAttr());
    func::ReturnOp::create(b, loc, ValueRange{norm, lr});
  }
};

} // namespace
