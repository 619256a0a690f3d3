//===- DeriveSampler.cpp - The logits function for text generation --------===//

#include "tessel/Transforms/DeadCode.h"
#include "tessel/Transforms/Passes.h"

#include "Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_DERIVESAMPLER
#include "tessel/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

/// `type` with dim `name` resized to `size`; other types unchanged.
Type resized(Type type, StringRef name, int64_t size) {
  auto shape = getNamedShape(type);
  if (!shape)
    return type;
  bool changed = false;
  for (NamedDim &d : *shape)
    if (d.name == name && d.size != size) {
      d.size = size;
      changed = true;
    }
  if (!changed)
    return type;
  return getNamedTensorType(type.getContext(), *shape,
                            cast<RankedTensorType>(type).getElementType());
}

struct DeriveSampler : tessel::impl::DeriveSamplerBase<DeriveSampler> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("has no @forward function");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto sample = cast<func::FuncOp>(b.clone(*forward));
    sample.setSymName("sample");
    Block &body = sample.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // The loss is the cross-entropy, or it plus the terms of `add_loss`, added after it.
    Value returned = ret.getOperand(0);
    SmallVector<Operation *> terms; // The adds, outermost first.
    while (auto add = returned.getDefiningOp<AddOp>()) {
      terms.push_back(add);
      returned = add.getLhs();
    }
    auto loss = returned.getDefiningOp<CrossEntropyOp>();
    if (!loss) {
      forward.emitError("must return a cross_entropy to derive a sampler from it");
      return signalPassFailure();
    }
    Value logits = loss.getLogits();
    ret->setOperands(logits);
    for (Operation *add : terms)
      add->erase();
    loss->erase();

    // Drop what no longer reaches the logits (the targets' uses went with the loss).
    eraseDeadPureOps(body);
    for (int i = static_cast<int>(body.getNumArguments()) - 1; i >= 0; --i)
      if (body.getArgument(i).use_empty())
        if (failed(sample.eraseArgument(i))) {
          sample.emitError("cannot drop unused argument #") << i;
          return signalPassFailure();
        }

    // One sequence at a time: the batch dim becomes 1 in every value.
    for (BlockArgument arg : body.getArguments())
      arg.setType(resized(arg.getType(), "batch", 1));
    body.walk([](Operation *op) {
      for (Value r : op->getResults())
        r.setType(resized(r.getType(), "batch", 1));
    });
    sample.setType(b.getFunctionType(body.getArgumentTypes(), {logits.getType()}));
  }
};

} // namespace
