//===- FoldAccumulate.cpp - Gradient kernels add into their accumulators --===//

#include "tessel/Dialect/Plan/Transforms/Passes.h"

#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include <map>
#include <set>

namespace tessel {
#define GEN_PASS_DEF_FOLDACCUMULATE
#include "tessel/Dialect/Plan/Transforms/Passes.h.inc"
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

/// The order of a module's ops within their blocks, and for each persistent tensor the ops
/// that take it as an operand, kept current as the pass folds: whether anything touches an
/// accumulator between a gradient's producer and its `accumulate` is then a lookup, not a walk
/// of the program between them (which made the pass quadratic in layers).
class ProgramOrder {
public:
  explicit ProgramOrder(ModuleOp module) {
    module.walk([&](Block *block) {
      int64_t next = 0;
      for (Operation &op : *block) {
        next += 2; // Even: a moved op takes the odd position just before another.
        position_[&op] = next;
        for (StringRef name : statesOf(&op))
          touching_[{block, name}].insert(next);
      }
    });
  }

  bool isBefore(Operation *a, Operation *b) const {
    return position_.lookup(a) < position_.lookup(b);
  }
  /// Whether an op strictly between `a` and `b` (in one block, `a` first) takes state `name`.
  bool touchedBetween(StringRef name, Operation *a, Operation *b) const {
    auto it = touching_.find({a->getBlock(), name});
    if (it == touching_.end())
      return false;
    auto after = it->second.upper_bound(position_.lookup(a));
    return after != it->second.end() && *after < position_.lookup(b);
  }

  /// Records `op` (a state op, which takes no operands) moved just before `anchor`.
  void moved(Operation *op, Operation *anchor) { position_[op] = position_.lookup(anchor) - 1; }
  /// Records that `op` now takes state `name` as an operand.
  void nowTakes(Operation *op, StringRef name) {
    touching_[{op->getBlock(), name}].insert(position_.lookup(op));
  }
  /// Records `op` about to be erased.
  void erasing(Operation *op) {
    for (StringRef name : statesOf(op))
      touching_[{op->getBlock(), name}].erase(position_.lookup(op));
    position_.erase(op);
  }

private:
  static llvm::SmallVector<StringRef, 2> statesOf(Operation *op) {
    llvm::SmallVector<StringRef, 2> names;
    for (Value v : op->getOperands())
      if (auto state = v.getDefiningOp<plan::StateOp>())
        if (!llvm::is_contained(names, state.getName()))
          names.push_back(state.getName());
    return names;
  }

  llvm::DenseMap<Operation *, int64_t> position_;
  std::map<std::pair<Block *, StringRef>, std::set<int64_t>> touching_;
};

/// The gemm or reduce that `accumulate` can hand its work to, or null.
plan::KernelOp foldableProducer(plan::KernelOp accumulate, const ProgramOrder &order) {
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
      !order.isBefore(producer, accumulate) || written(producer) != numElements(grad))
    return {};
  // Moving the addition earlier must not reorder it with another use of the accumulator.
  if (order.touchedBetween(state.getName(), producer, accumulate))
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
    ProgramOrder order(getOperation());
    for (plan::KernelOp acc : accumulates) {
      plan::KernelOp producer = foldableProducer(acc, order);
      if (!producer)
        continue;
      Value grad = acc.getIns()[0], state = acc.getOuts()[0];
      auto stateOp = cast<plan::StateOp>(state.getDefiningOp());
      // The state op reads nothing, so it can move up to the producer.
      if (!order.isBefore(stateOp, producer)) {
        stateOp->moveBefore(producer);
        order.moved(stateOp, producer);
      }
      producer.getOutsMutable()[0].set(state);
      order.nowTakes(producer, stateOp.getName());
      NamedAttrList params(producer.getParams());
      params.set("accumulate", IntegerAttr::get(IntegerType::get(&getContext(), 64), 1));
      producer.setParamsAttr(params.getDictionary(&getContext()));
      order.erasing(acc);
      acc.erase();
      order.erasing(grad.getDefiningOp());
      grad.getDefiningOp()->erase();
    }
  }
};

} // namespace
