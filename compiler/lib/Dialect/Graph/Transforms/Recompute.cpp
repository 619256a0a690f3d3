//===- Recompute.cpp - Activations recomputed in the backward pass --------===//
//
// The forward values of a layer that its backward pass reads are stored from the forward
// pass until then: the activation memory of training. With `recompute = full` only each
// layer's input is kept (the value another layer, or what follows the layers, reads); with
// `selective`, also the outputs of contractions and attention, which are costly to recompute,
// and of the collectives that sum partial products over tp (Korthikanti et al. 2022 keep GEMM
// outputs and the norms' inputs and drop what is cheap to recompute). Every other
// forward value a backward op reads is computed again right before its first backward use, by
// clones of the ops that made it, down to the kept values; the original's last use is then in
// the forward pass. Clones keep their attributes: the same layer and sharding, and the same
// dropout mask numbers, so they compute the same bits. Under `full`, collectives the partition
// pass put in the layer are recomputed with it; under `selective`, its all-gathers, as
// Megatron-LM re-gathers sequence-parallel activations.
// The clones are marked `graph.recomputed`; the plan keeps the mark on their kernels, and
// `--profile` reports their time apart.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/ForwardPass.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace tessel {
#define GEN_PASS_DEF_RECOMPUTE
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;

namespace {

constexpr const char kRecomputedAttr[] = "graph.recomputed";

using Mode = tessel::RecomputeMode;

class Recomputer {
public:
  Recomputer(func::FuncOp func, Mode mode) : func_(func), mode_(mode) {}

  /// Rewires every backward use of a value that is not kept to a recomputed copy; the number
  /// of ops cloned.
  int64_t run();

private:
  /// The layer an op belongs to: its `graph.layer`, or for an op the partition pass added
  /// (a collective) the one layer all its operands come from; -1 outside the layers.
  int64_t layerOf(Operation *op);
  /// Whether the values of `op` (a forward op of layer `layer`) are stored for the backward
  /// pass rather than recomputed.
  bool kept(Operation *op, int64_t layer);
  /// `v`, or its recomputed copy, cloned right before `at` (with what it needs) if not yet.
  Value recompute(Value v, Operation *at);

  func::FuncOp func_;
  Mode mode_;
  DenseSet<Operation *> forward_;
  DenseMap<Operation *, int64_t> layers_;
  IRMapping copies_;
  int64_t cloned_ = 0;
};

int64_t Recomputer::layerOf(Operation *op) {
  if (auto it = layers_.find(op); it != layers_.end())
    return it->second;
  int64_t layer = -1;
  if (auto attr = op->getAttrOfType<IntegerAttr>("graph.layer")) {
    layer = attr.getInt();
  } else if (op->getNumOperands() > 0) {
    for (Value x : op->getOperands()) {
      Operation *d = x.getDefiningOp();
      int64_t l = d ? layerOf(d) : -1;
      if (l < 0 || (layer >= 0 && l != layer)) {
        layer = -1;
        break;
      }
      layer = l;
    }
  }
  layers_[op] = layer;
  return layer;
}

bool Recomputer::kept(Operation *op, int64_t layer) {
  // Parameters and constants are not activations; ops with effects run once.
  if (op->getNumOperands() == 0 || !isPure(op) || op->getNumRegions() != 0)
    return true;
  // The layer's output: what another layer, or what follows the layers, reads.
  for (Operation *user : op->getUsers())
    if (forward_.contains(user) && layerOf(user) != layer)
      return true;
  // Selective keeps what is costly to compute again: products, attention, and the sums of
  // partial products over tp (Megatron-LM keeps the norms' inputs, the residual stream these
  // sums feed, rather than reduce again). All-gathers are recomputed: keeping their result
  // would store the whole tensor where its shard suffices, so the backward pass gathers again,
  // as Megatron-LM's sequence parallelism does.
  if (mode_ == Mode::Selective &&
      isa<graph::ContractOp, graph::AttentionOp, shard::AllReduceOp, shard::ReduceScatterOp>(op))
    return true;
  return false;
}

Value Recomputer::recompute(Value v, Operation *at) {
  if (Value copy = copies_.lookupOrNull(v))
    return copy;
  Operation *def = v.getDefiningOp();
  if (!def || !forward_.contains(def))
    return v;
  int64_t layer = layerOf(def);
  if (layer < 0 || kept(def, layer))
    return v;
  for (Value x : def->getOperands())
    recompute(x, at);
  OpBuilder b(at);
  Operation *clone = b.clone(*def, copies_); // Maps the results into copies_ too.
  // Kept to the plan, so a profile can tell what recomputation costs.
  clone->setAttr(kRecomputedAttr, b.getUnitAttr());
  ++cloned_;
  return copies_.lookup(v);
}

int64_t Recomputer::run() {
  Block &body = func_.getBody().front();
  forward_ = forwardPass(body);
  SmallVector<Operation *> backward;
  for (Operation &op : body.without_terminator())
    if (!forward_.contains(&op))
      backward.push_back(&op);
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (Value copy = recompute(use.get(), op); copy != use.get())
        use.set(copy);
  return cloned_;
}

struct Recompute : tessel::impl::RecomputeBase<Recompute> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Mode m = mode;
    if (m == Mode::Spec)
      switch (settings::parallelOf(module).getRecompute()) {
      case settings::RecomputeMode::None:
        m = Mode::None;
        break;
      case settings::RecomputeMode::Selective:
        m = Mode::Selective;
        break;
      case settings::RecomputeMode::Full:
        m = Mode::Full;
        break;
      }
    if (m == Mode::None)
      return;
    auto fb = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!fb)
      return;
    Recomputer(fb, m).run();
  }
};

} // namespace
