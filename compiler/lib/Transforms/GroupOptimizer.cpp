//===- GroupOptimizer.cpp - Multi-tensor optimizer calls ------------------===//
//
// Merges the per-tensor `adamw` / `sgd` calls of a program into calls over many tensors. The
// calls are rarely adjacent (ZeRO slices each shard before its update and gathers it after), so
// merging is a reordering: within the stretch of the program from a group's first call to its
// last, the ops the calls depend on go before the merged call and the others after it. Which
// op depends on which is read from values (uses of a definition) and buffers (a kernel that
// writes one against any other kernel that touches it, persistent tensors by name); collectives
// keep their order among themselves, and control kernels are fences.
//
//===----------------------------------------------------------------------===//

#include "tessel/Transforms/Passes.h"

#include "Plan/PlanDialect.h"

#include "common/KernelCatalogue.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

namespace tessel {
#define GEN_PASS_DEF_GROUPOPTIMIZER
#include "tessel/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
namespace cat = tessel::catalogue;

namespace {

/// The parameter of an optimizer call that lists its tensors' elements.
constexpr llvm::StringLiteral kElements = "n";

bool isOptimizer(plan::KernelOp k) { return k.getName() == "adamw" || k.getName() == "sgd"; }

/// What one op of a program touches: the buffers it reads and writes (by root: a persistent
/// tensor by name, an arena buffer by its allocation), and whether it is a collective (which
/// keep their order) or a fence (nothing crosses it).
struct Effects {
  llvm::SmallVector<int, 4> reads, writes;
  bool collective = false, fence = false;
};

/// Interns the roots of buffers: a view is its source's; a persistent tensor is its name's (two
/// `plan.state` ops of one name are one buffer); an allocation is itself, unless the memory
/// planner has placed it already, in which case any two may share bytes and all are one root.
class Roots {
public:
  int of(Value v) {
    while (auto view = v.getDefiningOp<plan::ViewOp>())
      v = view.getSource();
    if (auto state = v.getDefiningOp<plan::StateOp>())
      return intern(byName_, state.getName());
    if (auto alloc = v.getDefiningOp<plan::AllocOp>(); alloc && alloc.getOffset())
      return intern(byName_, "<arena>");
    auto [it, fresh] = byValue_.try_emplace(v.getAsOpaquePointer(), next_);
    next_ += fresh;
    return it->second;
  }

private:
  int intern(llvm::StringMap<int> &map, StringRef key) {
    auto [it, fresh] = map.try_emplace(key, next_);
    next_ += fresh;
    return it->second;
  }
  llvm::StringMap<int> byName_;
  llvm::DenseMap<const void *, int> byValue_;
  int next_ = 0;
};

Effects effectsOf(Operation *op, Roots &roots) {
  Effects e;
  if (auto k = dyn_cast<plan::KernelOp>(op)) {
    for (Value v : k.getIns())
      e.reads.push_back(roots.of(v));
    // An output may be read as well (an optimizer updates its state in place).
    for (Value v : k.getOuts())
      e.writes.push_back(roots.of(v));
    if (const cat::KernelInfo *info = cat::findKernel(k.getName().str())) {
      e.collective = info->family == cat::Family::Collective;
      e.fence = info->family == cat::Family::Control;
    }
    return e;
  }
  if (auto out = dyn_cast<plan::OutputOp>(op))
    e.reads.push_back(roots.of(out.getValue()));
  else if (!isa<plan::StateOp, plan::AllocOp, plan::ViewOp, plan::InputOp>(op))
    e.fence = true; // An op this pass does not know moves nothing across it.
  return e;
}

/// The ops of the stretch a group spans, with their effects and the order-keeping checks.
class Stretch {
public:
  Stretch(Operation *first, Operation *last, Roots &roots) {
    for (Operation *op = first;; op = op->getNextNode()) {
      ops_.push_back(op);
      effects_.push_back(effectsOf(op, roots));
      if (op == last)
        break;
    }
  }

  /// The stretch's non-member ops that `members` depend on, in program order, in `before`: the
  /// merged call must follow them, and the others stay after it. False when an op would have to
  /// come both before and after the merged call, or one member depends on another.
  bool split(const llvm::SmallPtrSetImpl<Operation *> &members,
             llvm::SmallVectorImpl<Operation *> &before) const {
    const size_t n = ops_.size();
    // Forward: what depends on a member.
    std::vector<bool> later(n, false);
    {
      Footprint seen;
      for (size_t i = 0; i < n; ++i) {
        bool member = members.contains(ops_[i]);
        bool dependent = seen.reachedBy(ops_[i], effects_[i]);
        if (member && dependent)
          return false; // A member reads or writes what an earlier member writes.
        if (member || dependent) {
          later[i] = !member;
          seen.add(ops_[i], effects_[i]);
        }
      }
    }
    // Backward: what a member depends on.
    std::vector<bool> earlier(n, false);
    {
      Footprint seen;
      for (size_t i = n; i-- > 0;) {
        bool member = members.contains(ops_[i]);
        if (member || seen.reaches(ops_[i], effects_[i])) {
          earlier[i] = !member;
          seen.add(ops_[i], effects_[i]);
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (earlier[i] && later[i])
        return false;
      if (earlier[i])
        before.push_back(ops_[i]);
    }
    return true;
  }

private:
  /// The values, buffers and kinds of a set of ops, against which another op is checked.
  struct Footprint {
    llvm::DenseSet<int> reads, writes;
    llvm::DenseSet<Value> defined, used;
    bool collective = false, fence = false;

    void add(Operation *op, const Effects &e) {
      reads.insert(e.reads.begin(), e.reads.end());
      writes.insert(e.writes.begin(), e.writes.end());
      for (Value v : op->getResults())
        defined.insert(v);
      for (Value v : op->getOperands())
        used.insert(v);
      collective |= e.collective;
      fence |= e.fence;
    }

    bool conflicts(const Effects &e) const {
      if (fence || e.fence || (collective && e.collective))
        return true;
      for (int r : e.writes)
        if (reads.contains(r) || writes.contains(r))
          return true;
      for (int r : e.reads)
        if (writes.contains(r))
          return true;
      return false;
    }

    /// Whether `op`, coming after the set, depends on it.
    bool reachedBy(Operation *op, const Effects &e) const {
      return conflicts(e) ||
             llvm::any_of(op->getOperands(), [&](Value v) { return defined.contains(v); });
    }
    /// Whether the set, coming after `op`, depends on it.
    bool reaches(Operation *op, const Effects &e) const {
      return conflicts(e) ||
             llvm::any_of(op->getResults(), [&](Value v) { return used.contains(v); });
    }
  };

  std::vector<Operation *> ops_;
  std::vector<Effects> effects_;
};

/// Calls that may share one call: the same kernel, scalars (lr, c), parameters other than the
/// element counts, and working copies (present or not, and their type).
struct GroupKey {
  StringRef kernel;
  llvm::SmallVector<Value, 2> scalars;
  DictionaryAttr params;
  size_t outsPerTensor;
  Type working;

  bool operator==(const GroupKey &o) const {
    return kernel == o.kernel && scalars == o.scalars && params == o.params &&
           outsPerTensor == o.outsPerTensor && working == o.working;
  }
};

/// How a call's operands split into per-tensor roles and the scalars: `tensors` tensors, each
/// role's operands together (the catalogue's layout).
struct Layout {
  size_t tensors = 0, insPerTensor = 0, outsPerTensor = 0;
  /// Whether the call has its optional per-tensor outputs (AdamW's working copies).
  bool optional = false;
};

std::optional<Layout> layoutOf(plan::KernelOp k) {
  const cat::KernelInfo *info = cat::findKernel(k.getName().str());
  auto n = dyn_cast_or_null<DenseI64ArrayAttr>(k.getParams().get(kElements));
  if (!info || !n)
    return std::nullopt;
  Layout l;
  l.tensors = static_cast<size_t>(n.size());
  if (l.tensors == 0 || cat::tensorsOf(*info, k.getIns().size()) != l.tensors ||
      k.getOuts().size() % l.tensors)
    return std::nullopt;
  for (const cat::OperandInfo &o : info->ins)
    l.insPerTensor += o.count == cat::OperandCount::Each;
  size_t required = 0;
  for (const cat::OperandInfo &o : info->outs)
    required += o.count == cat::OperandCount::Each;
  l.outsPerTensor = k.getOuts().size() / l.tensors;
  l.optional = l.outsPerTensor > required;
  return l;
}

GroupKey keyOf(plan::KernelOp k, const Layout &l) {
  GroupKey key;
  key.kernel = k.getName();
  for (Value v : k.getIns().drop_front(l.insPerTensor * l.tensors))
    key.scalars.push_back(v);
  NamedAttrList params(k.getParams());
  params.erase(kElements);
  key.params = params.getDictionary(k.getContext());
  key.outsPerTensor = l.outsPerTensor;
  // A call's working copies have one type, which the devices read from its first.
  if (l.optional)
    key.working = cast<MemRefType>(k.getOuts().back().getType()).getElementType();
  return key;
}

/// The bytes of the arena buffers that `ops` allocate: moved before a merged call, they stay
/// alive until it.
int64_t allocatedBytes(ArrayRef<Operation *> ops) {
  int64_t bytes = 0;
  for (Operation *op : ops)
    if (auto alloc = dyn_cast<plan::AllocOp>(op)) {
      MemRefType t = alloc.getType();
      bytes += t.getNumElements() * static_cast<int64_t>(t.getElementTypeBitWidth() / 8);
    }
  return bytes;
}

/// The ops that must move before one call merging `members` (in program order), in `before`;
/// false where the members cannot be merged.
bool splitGroup(ArrayRef<plan::KernelOp> members, SmallVectorImpl<Operation *> &before) {
  Roots roots;
  Stretch stretch(members.front(), members.back(), roots);
  llvm::SmallPtrSet<Operation *, 16> set;
  for (plan::KernelOp k : members)
    set.insert(k);
  return stretch.split(set, before);
}

/// One call over every tensor of `members` (in order), at the first member's place.
void merge(ArrayRef<plan::KernelOp> members) {
  SmallVector<plan::KernelOp> calls(members);
  SmallVector<Layout> layouts;
  for (plan::KernelOp k : calls)
    layouts.push_back(*layoutOf(k));
  const Layout &first = layouts.front();
  plan::KernelOp head = calls.front();
  SmallVector<Value> ins, outs;
  SmallVector<int64_t> elements;
  for (size_t r = 0; r < first.insPerTensor; ++r)
    for (size_t i = 0; i < calls.size(); ++i)
      for (size_t t = 0; t < layouts[i].tensors; ++t)
        ins.push_back(calls[i].getIns()[r * layouts[i].tensors + t]);
  for (Value v : head.getIns().drop_front(first.insPerTensor * first.tensors))
    ins.push_back(v);
  for (size_t r = 0; r < first.outsPerTensor; ++r)
    for (size_t i = 0; i < calls.size(); ++i)
      for (size_t t = 0; t < layouts[i].tensors; ++t)
        outs.push_back(calls[i].getOuts()[r * layouts[i].tensors + t]);
  for (plan::KernelOp k : calls)
    llvm::append_range(elements,
                       cast<DenseI64ArrayAttr>(k.getParams().get(kElements)).asArrayRef());
  OpBuilder b(head);
  NamedAttrList params(head.getParams());
  params.set(kElements, b.getDenseI64ArrayAttr(elements));
  plan::KernelOp::create(b, head.getLoc(), head.getName(), ins, outs,
                         params.getDictionary(b.getContext()));
  for (plan::KernelOp k : calls)
    k.erase();
}

struct GroupOptimizerPass : tessel::impl::GroupOptimizerBase<GroupOptimizerPass> {
  using GroupOptimizerBase::GroupOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t cap = maxBytes;
    if (cap <= 0) {
      cap = 25ll << 20;
      if (auto par = module->getAttrOfType<DictionaryAttr>("tessel.parallel"))
        if (auto b = par.getAs<IntegerAttr>("bucket_bytes"))
          cap = b.getInt();
    }
    for (auto program : module.getOps<plan::ProgramOp>())
      group(program.getBody().front(), cap);
  }

  /// Groups the optimizer calls of `block`, key by key, each group greedily in program order.
  void group(Block &block, int64_t cap) {
    llvm::MapVector<size_t, SmallVector<plan::KernelOp>> byKey;
    SmallVector<GroupKey> keys;
    for (auto k : block.getOps<plan::KernelOp>()) {
      if (!isOptimizer(k))
        continue;
      std::optional<Layout> l = layoutOf(k);
      if (!l)
        continue; // The verifier reports it.
      GroupKey key = keyOf(k, *l);
      auto it = llvm::find(keys, key);
      size_t index = static_cast<size_t>(it - keys.begin());
      if (it == keys.end())
        keys.push_back(key);
      byKey[index].push_back(k);
    }
    for (auto &[index, calls] : byKey) {
      // Merging one key's calls moves ops, so another key's calls are put in order again.
      llvm::sort(calls, [](plan::KernelOp a, plan::KernelOp b) { return a->isBeforeInBlock(b); });
      SmallVector<plan::KernelOp> members;
      for (plan::KernelOp k : calls) {
        if (!members.empty() && fits(members, k, cap)) {
          members.push_back(k);
          continue;
        }
        flush(members);
        members = {k};
      }
      flush(members);
    }
  }

  /// Whether `next` can join `members`: the group with it can be merged, and what moves before
  /// the merged call allocates at most `cap` bytes.
  bool fits(ArrayRef<plan::KernelOp> members, plan::KernelOp next, int64_t cap) {
    SmallVector<plan::KernelOp> group(members);
    group.push_back(next);
    SmallVector<Operation *> before;
    return splitGroup(group, before) && allocatedBytes(before) <= cap;
  }

  /// Reorders the stretch of `members` and merges them (nothing for a group of one).
  void flush(ArrayRef<plan::KernelOp> members) {
    SmallVector<Operation *> before;
    if (members.size() < 2 || !splitGroup(members, before))
      return; // Checked when each member joined; kept as a guard.
    for (Operation *op : before)
      op->moveBefore(members.front());
    merge(members);
  }
};

} // namespace
