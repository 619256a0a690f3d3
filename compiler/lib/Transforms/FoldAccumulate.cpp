//===- FoldAccumulate.cpp - Gradient kernels add into their accumulators --===//

#include "tessel/Transforms/Passes.h"

#include "Plan/PlanDialect.h"

namespace tessel {
#define GEN_PASS_DEF_FOLDACCUMULATE
#include "tessel/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

int64_t numElements(Value v) { return cast<MemRefType>(v.getType()).getNumElements(); }

/// The elements a kernel that can add into its output writes (gemm: one m x n block per batch
/// index; reduce: its y), or 0 for a kernel that cannot.
int64_t written(plan::KernelOp k) {
  DictionaryAttr p = k.getParams();
  if (k.getName() == "reduce")
    return cast<IntegerAttr>(p.get("y_elements")).getInt();
  if (k.getName() != "gemm")
    return 0;
  int64_t n = cast<IntegerAttr>(p.get("m")).getInt() * cast<IntegerAttr>(p.get("n")).getInt();
  for (int64_t b : cast<DenseI64ArrayAttr>(p.get("batch_shape")).asArrayRef())
    n *= b;
  return n;
}

/// Whether `op` reads or writes the state named `name`.
bool touchesState(Operation *op, StringRef name) {
  return llvm::any_of(op->getOperands(), [&](Value v) {
    auto state = v.getDefiningOp<plan::StateOp>();
    return state && state.getName() == name;
  });
}

/// The gemm or reduce that `accumulate` can hand its work to, or null.
plan::KernelOp foldableProducer(plan::KernelOp accumulate) {
  Value grad = accumulate.getIns()[0];
  auto state = accumulate.getOuts()[0].getDefiningOp<plan::StateOp>();
  if (!state || !grad.getDefiningOp<plan::AllocOp>() || grad.getType() != state.getType())
    return {};
  // The buffer is written by one gemm or reduce, as its only output, and read by `accumulate`
  // alone.
  plan::KernelOp producer;
  for (Operation *user : grad.getUsers()) {
    if (user == accumulate.getOperation())
      continue;
    auto k = dyn_cast<plan::KernelOp>(user);
    if (producer || !k || written(k) == 0 || k.getOuts().size() != 1 || k.getOuts()[0] != grad ||
        llvm::is_contained(k.getIns(), grad) || k.getParams().contains("accumulate"))
      return {};
    producer = k;
  }
  if (!producer || producer->getBlock() != accumulate->getBlock() ||
      !producer->isBeforeInBlock(accumulate) || written(producer) != numElements(grad))
    return {};
  // Moving the addition earlier must not reorder it with another use of the accumulator.
  for (Operation *op = producer->getNextNode(); op != accumulate.getOperation();
       op = op->getNextNode())
    if (touchesState(op, state.getName()))
      return {};
  return producer;
}

struct FoldAccumulate : tessel::impl::FoldAccumulateBase<FoldAccumulate> {
  void runOnOperation() override {
    SmallVector<plan::KernelOp> accumulates;
    getOperation().walk([&](plan::KernelOp k) {
      if (k.getName() == "accumulate")
        accumulates.push_back(k);
    });
    for (plan::KernelOp acc : accumulates) {
      plan::KernelOp producer = foldableProducer(acc);
      if (!producer)
        continue;
      Value grad = acc.getIns()[0], state = acc.getOuts()[0];
      // The state op reads nothing, so it can move up to the producer.
      if (!state.getDefiningOp()->isBeforeInBlock(producer))
        state.getDefiningOp()->moveBefore(producer);
      producer.getOutsMutable()[0].set(state);
      NamedAttrList params(producer.getParams());
      params.set("accumulate", IntegerAttr::get(IntegerType::get(&getContext(), 64), 1));
      producer.setParamsAttr(params.getDictionary(&getContext()));
      acc.erase();
      grad.getDefiningOp()->erase();
    }
  }
};

} // namespace
