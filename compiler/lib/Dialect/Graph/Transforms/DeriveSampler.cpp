//===- DeriveSampler.cpp - The logits function for text generation --------===//

#include "tessel/Dialect/Graph/Transforms/Logits.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_DERIVESAMPLER
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

struct DeriveSampler : tessel::impl::DeriveSamplerBase<DeriveSampler> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("has no @forward function");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    func::FuncOp sample = cloneLogitsFunction(b, forward, "sample");
    if (!sample)
      return signalPassFailure();
    // One sequence at a time: the batch dim becomes 1 in every value.
    Block &body = sample.getBody().front();
    for (BlockArgument arg : body.getArguments())
      arg.setType(resizedDim(arg.getType(), "batch", 1));
    body.walk([](Operation *op) {
      for (Value r : op->getResults())
        r.setType(resizedDim(r.getType(), "batch", 1));
    });
    sample.setType(b.getFunctionType(body.getArgumentTypes(),
                                     body.getTerminator()->getOperandTypes()));
  }
};

} // namespace
