//===- GraphToPlan.cpp - Graph functions to plan programs -----------------===//
//
// The -tessel-lower-to-plan pass: the type converter (tensors to memrefs), the legality of
// the target, the patterns for functions and returns, and the order in which functions are
// converted. The op patterns are in one file per op family (PlanLowering.h lists them).
//
//===----------------------------------------------------------------------===//

#include "PlanLowering.h"
#include "tessel/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace tessel {
#define GEN_PASS_DEF_LOWERTOPLAN
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::plan_lowering;

namespace {

/// The plan program a function becomes: the training functions by their role (`forward` is
/// the evaluation program), the pipeline stages' pieces by their `tessel.program`.
StringRef programNameOf(func::FuncOp func) {
  if (auto program = func->getAttrOfType<StringAttr>("tessel.program"))
    return program.getValue();
  return func.getName() == "forward" ? StringRef("eval") : func.getName();
}

/// A function becomes a plan.program: its arguments plan.input buffers named by `graph.name`,
/// its body the plan ops its ops lower to.
struct FunctionPattern : OpConversionPattern<func::FuncOp> {
  FunctionPattern(const TypeConverter &converter, MLIRContext *context, PlanLowering &lowering)
      : OpConversionPattern(converter, context), lowering(lowering) {}

  LogicalResult matchAndRewrite(func::FuncOp func, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto program = plan::ProgramOp::create(
        rewriter, func.getLoc(), rewriter.getStringAttr(programNameOf(func)), IntegerAttr(),
        func->getAttrOfType<IntegerAttr>("tessel.stage"));
    Block *entry = rewriter.createBlock(&program.getBody());
    Block &body = func.getBody().front();
    SmallVector<Value> inputs;
    for (BlockArgument arg : body.getArguments()) {
      auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "graph.name");
      if (!name) {
        func.emitError("argument #") << arg.getArgNumber() << " has no graph.name";
        lowering.markFailed();
        name = rewriter.getStringAttr("arg" + std::to_string(arg.getArgNumber()));
      }
      ArrayAttr split;
      if (auto s =
              func.getArgAttrOfType<graph::ShardingAttr>(arg.getArgNumber(), "graph.sharding")) {
        SmallVector<Attribute> groups;
        for (const std::string &axis : graph::getSharding(s).axes)
          groups.push_back(rewriter.getStringAttr(axis));
        split = rewriter.getArrayAttr(groups);
      }
      inputs.push_back(plan::InputOp::create(rewriter, arg.getLoc(),
                                             PlanEmitter::memrefType(arg.getType()), name,
                                             IntegerAttr(), split));
    }
    // Results are named by the function's `graph.name`s, or by what the program computes.
    static const std::map<std::string, std::vector<std::string>> kResultNames = {
        {"eval", {"loss"}},
        {"forward_backward", {"loss"}},
        {"optimizer_step", {"grad_norm", "lr"}},
        {"sample", {"logits"}}};
    auto known = kResultNames.find(programNameOf(func).str());
    SmallVector<std::string> names;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto named = func.getResultAttrOfType<StringAttr>(i, "graph.name");
      names.push_back(named ? named.str()
                      : known != kResultNames.end() && i < known->second.size()
                          ? known->second[i]
                          : "result" + std::to_string(i));
    }
    lowering.setOutputNames(program, std::move(names));
    rewriter.inlineBlockBefore(&body, entry, entry->end(), inputs);
    rewriter.eraseOp(func);
    return success();
  }

  PlanLowering &lowering;
};

/// A return becomes one plan.output per value, named as FunctionPattern recorded.
struct ReturnPattern : OpConversionPattern<func::ReturnOp> {
  ReturnPattern(const TypeConverter &converter, MLIRContext *context, PlanLowering &lowering)
      : OpConversionPattern(converter, context), lowering(lowering) {}

  LogicalResult matchAndRewrite(func::ReturnOp ret, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    ArrayRef<std::string> names = lowering.outputNames(ret->getParentOp());
    for (auto [name, v] : llvm::zip(names, adaptor.getOperands()))
      plan::OutputOp::create(rewriter, ret.getLoc(), rewriter.getStringAttr(name), v);
    rewriter.eraseOp(ret);
    return success();
  }

  PlanLowering &lowering;
};

/// Any other op of a converted function: reported, and replaced by fresh buffers so the rest
/// of the function still converts and its errors are reported too.
struct NoLoweringPattern : ConversionPattern {
  NoLoweringPattern(const TypeConverter &converter, MLIRContext *context, PlanLowering &lowering)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/0, context),
        lowering(lowering) {}

  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value>,
                                ConversionPatternRewriter &rewriter) const override {
    op->emitOpError("has no lowering to the plan dialect");
    lowering.markFailed();
    PlanEmitter emit(rewriter, op);
    rewriter.replaceOp(op, emit.takeResults());
    return success();
  }

  PlanLowering &lowering;
};

struct LowerToPlan : tessel::impl::LowerToPlanBase<LowerToPlan> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();

    // Functions in the order their programs declare state: forward_backward (which reads
    // every parameter) first, since optimizer_step needs the parameters' declarations; then
    // the pipeline stages' pieces, their optimizer steps last.
    SmallVector<Operation *> functions;
    for (StringRef name : {"forward_backward", "optimizer_step", "forward", "sample"})
      if (auto func = module.lookupSymbol<func::FuncOp>(name))
        functions.push_back(func);
    // The decode programs (a module of their own) in the order they were derived.
    for (auto func : module.getOps<func::FuncOp>())
      if (func.getName() == "prefill" || func.getName().starts_with("decode_b"))
        functions.push_back(func);
    for (bool optimizer : {false, true})
      for (auto func : module.getOps<func::FuncOp>()) {
        auto program = func->getAttrOfType<StringAttr>("tessel.program");
        if (program && (program.getValue() == "optimizer_step") == optimizer)
          functions.push_back(func);
      }
    // A decoder module whose model has no decode programs says why instead.
    if (functions.empty() && module->hasAttr("tessel.decode_refused"))
      return;
    if (functions.empty()) {
      module.emitError("has no function to lower; expected @forward_backward, "
                       "@optimizer_step, @forward, @sample or decode programs");
      return signalPassFailure();
    }
    TypeConverter converter;
    converter.addConversion([](Type t) { return t; });
    converter.addConversion([](RankedTensorType t) -> Type { return PlanEmitter::memrefType(t); });

    ConversionTarget target(*context);
    target.addLegalDialect<plan::PlanDialect>();
    target.addIllegalDialect<graph::GraphDialect, shard::ShardDialect, func::FuncDialect>();

    PlanLowering lowering(module);
    RewritePatternSet patterns(context);
    patterns.add<FunctionPattern, ReturnPattern, NoLoweringPattern>(converter, context, lowering);
    populateElementwisePatterns(patterns, converter, lowering);
    populateContractionPatterns(patterns, converter, lowering);
    populateNormalizationPatterns(patterns, converter, lowering);
    populateLossPatterns(patterns, converter, lowering);
    populateLinearCrossEntropyPatterns(patterns, converter, lowering);
    populateAttentionPatterns(patterns, converter, lowering);
    populateDataMovementPatterns(patterns, converter, lowering);
    populateCollectivePatterns(patterns, converter, lowering);
    populateTrainingStatePatterns(patterns, converter, lowering);
    FrozenRewritePatternSet frozen(std::move(patterns));

    ConversionConfig config;
    config.foldingMode = DialectConversionFoldingMode::Never;
    // One function at a time, in the order above, so state is declared in that order.
    for (Operation *func : functions)
      if (failed(applyPartialConversion(ArrayRef<Operation *>{func}, target, frozen, config)))
        return signalPassFailure();
    if (lowering.failed())
      return signalPassFailure();

    lowering.declareState();
    // The grid becomes the plan's mesh and its communicator groups.
    lowering.declareMesh();
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      grid.erase();
  }
};

} // namespace
