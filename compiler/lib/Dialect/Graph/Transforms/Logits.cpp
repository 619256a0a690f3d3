//===- Logits.cpp - Functions that return the model's logits --------------===//

#include "tessel/Dialect/Graph/Transforms/Logits.h"
#include "tessel/Dialect/Graph/Transforms/DeadCode.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

Type tessel::resizedDim(Type type, StringRef name, int64_t size) {
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

func::FuncOp tessel::cloneLogitsFunction(OpBuilder &b, func::FuncOp forward, StringRef name) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointAfter(forward);
  auto clone = cast<func::FuncOp>(b.clone(*forward));
  clone.setSymName(name);
  Block &body = clone.getBody().front();
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
    forward.emitError("must return a cross_entropy to derive @") << name << " from it";
    clone.erase();
    return {};
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
      if (failed(clone.eraseArgument(i))) {
        clone.emitError("cannot drop unused argument #") << i;
        clone.erase();
        return {};
      }
  clone.setType(b.getFunctionType(body.getArgumentTypes(), {logits.getType()}));
  return clone;
}
