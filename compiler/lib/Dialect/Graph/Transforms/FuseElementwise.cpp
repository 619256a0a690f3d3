//===- FuseElementwise.cpp - Chains of elementwise ops as one op ----------===//
//
// Elementwise ops read and write whole tensors, so a chain of k of them (bias add, GELU,
// residual add; their gradients) moves each element through memory k times. This pass groups
// maximal connected sets of elementwise ops that produce one tensor type into a
// `graph.fused_elementwise`, whose body the runtime evaluates a tile at a time: the group reads
// its inputs and writes its outputs once.
//
// Ops are taken in program order; an op joins the groups its operands come from when the
// group stays convex: no value of the group may be read outside it before the op (the fused
// op takes the place of the group's last op, so such a reader would come before its operand;
// it is also how a contraction between two elementwise ops keeps them apart). A value read
// outside its group is a result of the fused op. Operands from outside are the fused op's
// inputs; a `graph.broadcast` read only by one group is read through strides instead of
// copied, and scalar constants become `const` steps. A group of one op is left as it is.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "common/catalogue/KernelCatalogue.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/ADT/bit.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <functional>

namespace tessel {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
namespace cat = tessel::catalogue;

namespace {

/// The binary op or comparison a graph op is, by its name: the catalogue's word.
std::optional<cat::BinaryOp> binaryOf(StringRef name) {
  return cat::enumOf<cat::BinaryOp>(std::string_view(name.data(), name.size()));
}

/// Whether `op` computes each element of its result from the same element of its operands,
/// as one step of a fused body.
bool isFusible(Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  return TypeSwitch<Operation *, bool>(op)
      .Case<graph::WhereOp, graph::UnaryOp, graph::UnaryGradOp>([](auto) { return true; })
      .Default([](Operation *o) {
        // The binary ops and comparisons, by the catalogue's words (dropout is not
        // elementwise in its mask).
        return isa<graph::GraphDialect>(o->getDialect()) &&
               binaryOf(o->getName().stripDialect()).has_value();
      });
}

class Fuser {
public:
  Fuser(func::FuncOp func) : func_(func) {}

  /// Forms the groups and replaces each of two ops or more by a fused op; the number made.
  int64_t run();

private:
  using Group = SmallVector<Operation *>;
  /// Whether `members` (in program order, `op` last) can become one op placed at `op`: every
  /// reader of their values outside them comes after `op`.
  bool convex(ArrayRef<Operation *> members, Operation *op) const;
  void fuse(const Group &group);

  func::FuncOp func_;
  /// The group each op belongs to, by index into groups_.
  DenseMap<Operation *, int64_t> groupOf_;
  std::vector<Group> groups_;
};

bool Fuser::convex(ArrayRef<Operation *> members, Operation *op) const {
  llvm::SmallPtrSet<Operation *, 16> in(members.begin(), members.end());
  for (Operation *m : members)
    for (Operation *user : m->getResult(0).getUsers())
      if (!in.count(user) && (user->getBlock() != op->getBlock() || user->isBeforeInBlock(op)))
        return false;
  return true;
}

int64_t Fuser::run() {
  // Steps a body may hold, with room for its constants.
  const size_t maxOps = cat::kMaxBodySteps / 2;
  for (Block &block : func_.getBody()) {
    for (Operation &op : block) {
      if (!isFusible(&op))
        continue;
      Type type = op.getResult(0).getType();
      // The groups of the operands that produce the same type, largest first.
      SmallVector<int64_t> candidates;
      for (Value v : op.getOperands()) {
        Operation *def = v.getDefiningOp();
        auto it = def ? groupOf_.find(def) : groupOf_.end();
        if (it != groupOf_.end() && v.getType() == type &&
            !llvm::is_contained(candidates, it->second))
          candidates.push_back(it->second);
      }
      llvm::stable_sort(
          candidates, [&](int64_t a, int64_t b) { return groups_[a].size() > groups_[b].size(); });
      // All of them if that stays convex, else the largest that does.
      SmallVector<int64_t> chosen;
      for (int64_t g : candidates) {
        Group merged;
        for (int64_t c : chosen)
          merged.append(groups_[c]);
        merged.append(groups_[g]);
        if (merged.size() + 1 > maxOps)
          continue;
        merged.push_back(&op);
        if (convex(merged, &op))
          chosen.push_back(g);
      }
      int64_t target;
      if (chosen.empty()) {
        target = static_cast<int64_t>(groups_.size());
        groups_.emplace_back();
      } else {
        target = chosen.front();
        for (int64_t g : ArrayRef(chosen).drop_front()) {
          for (Operation *m : groups_[g])
            groupOf_[m] = target;
          groups_[target].append(groups_[g]);
          groups_[g].clear();
        }
        // Keep program order (the body's steps follow it).
        llvm::sort(groups_[target],
                   [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      }
      groups_[target].push_back(&op);
      groupOf_[&op] = target;
    }
  }
  int64_t made = 0;
  for (const Group &g : groups_)
    if (g.size() >= 2) {
      fuse(g);
      ++made;
    }
  return made;
}

void Fuser::fuse(const Group &group) {
  Operation *last = group.back();
  Type type = last->getResult(0).getType();
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());

  cat::ElementwiseBody body;
  SmallVector<Value> inputs;
  DenseMap<Value, cat::BodyReg> regs;
  DenseMap<uint64_t, int32_t> constants; // By the value's bits.
  SmallVector<Operation *> absorbed;     // Broadcasts and constants read only through the group.
  auto stepReg = [&](int32_t index) { return cat::BodyReg{false, index}; };
  std::function<cat::BodyReg(Value)> operand = [&](Value v) -> cat::BodyReg {
    if (auto it = regs.find(v); it != regs.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    // A constant is a step of its own (one per value), which `fill` would otherwise write.
    if (auto c = dyn_cast_or_null<graph::ConstantOp>(def)) {
      double value = c.getValue().convertToDouble();
      auto [it, fresh] = constants.try_emplace(llvm::bit_cast<uint64_t>(value),
                                               static_cast<int32_t>(body.steps.size()));
      if (fresh) {
        cat::BodyStep s;
        s.kind = cat::BodyStep::Kind::Const;
        s.value = value;
        body.steps.push_back(s);
        absorbed.push_back(def);
      }
      return regs[v] = stepReg(it->second);
    }
    // A broadcast read by this group alone is read through strides instead of copied.
    if (auto b = dyn_cast_or_null<graph::BroadcastOp>(def)) {
      if (llvm::all_of(b->getUsers(), [&](Operation *u) { return members.count(u); })) {
        absorbed.push_back(def);
        cat::BodyReg r = operand(b.getInput());
        return regs[v] = r;
      }
    }
    inputs.push_back(v);
    return regs[v] = cat::BodyReg{true, static_cast<int32_t>(inputs.size() - 1)};
  };

  SmallVector<Value> results;
  SmallVector<int64_t> outputs;
  SmallVector<Location> locs;
  for (Operation *op : group) {
    cat::BodyStep s;
    auto args = [&](ValueRange vs) {
      for (auto [k, v] : llvm::enumerate(vs))
        s.args[k] = operand(v);
    };
    TypeSwitch<Operation *>(op)
        .Case([&](graph::WhereOp o) {
          s.kind = cat::BodyStep::Kind::Where;
          args(o->getOperands());
        })
        .Case<graph::UnaryOp, graph::UnaryGradOp>([&](auto o) {
          s.kind =
              isa<graph::UnaryOp>(o) ? cat::BodyStep::Kind::Unary : cat::BodyStep::Kind::UnaryGrad;
          s.unary = o.getFn();
          if (std::optional<APFloat> e = o.getExponent())
            s.value = e->convertToDouble();
          args(o->getOperands());
        })
        .Default([&](Operation *o) {
          s.kind = cat::BodyStep::Kind::Binary;
          s.binary = *binaryOf(o->getName().stripDialect());
          args(o->getOperands());
        });
    int32_t index = static_cast<int32_t>(body.steps.size());
    body.steps.push_back(s);
    regs[op->getResult(0)] = stepReg(index);
    locs.push_back(op->getLoc());
    // A value read outside the group is a result: never fused away.
    if (llvm::any_of(op->getUsers(), [&](Operation *u) { return !members.count(u); })) {
      results.push_back(op->getResult(0));
      outputs.push_back(index);
    }
  }
  if (results.empty())
    return; // Nothing reads the group; dead code elimination is not this pass's business.

  OpBuilder b(last);
  SmallVector<Type> types(results.size(), type);
  auto fused = graph::FusedElementwiseOp::create(
      b, FusedLoc::get(b.getContext(), locs), types, inputs,
      b.getStringAttr(cat::formatElementwiseBody(body)), b.getDenseI64ArrayAttr(outputs));
  if (Attribute layer = last->getAttr("graph.layer"))
    fused->setAttr("graph.layer", layer);
  // Recomputation (-tessel-recompute) is told apart in profiles when the whole group is one.
  if (llvm::all_of(group, [](Operation *op) { return op->hasAttr("graph.recomputed"); }))
    fused->setAttr("graph.recomputed", b.getUnitAttr());
  for (auto [r, f] : llvm::zip(results, fused.getResults()))
    r.replaceUsesWithIf(f, [&](OpOperand &use) { return !members.count(use.getOwner()); });
  for (Operation *op : llvm::reverse(group))
    op->erase();
  for (Operation *op : llvm::reverse(absorbed))
    if (op->use_empty())
      op->erase();
}

class FuseElementwisePass : public tessel::impl::FuseElementwiseBase<FuseElementwisePass> {
public:
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) { Fuser(func).run(); });
  }
};

} // namespace
