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

#include "tessel/Dialect/Plan/Transforms/Passes.h"

#include "tessel/Dialect/Plan/IR/PlanDialect.h"
#include "tessel/Dialect/Settings/IR/SettingsDialect.h"

#include "common/catalogue/KernelCatalogue.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/IR/Builders.h"

namespace tessel {
#define GEN_PASS_DEF_GROUPOPTIMIZER
#include "tessel/Dialect/Plan/Transforms/Passes.h.inc"
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

/// The ops of a block in program order, each with the earlier ops it directly depends on: the
/// definitions of its operands, the last writer of each buffer it touches and the readers since
/// (a write must follow them), and the previous collective. Reachability through these edges is
/// the pairwise relation "touches what the other writes, uses its value, or both are
/// collectives", and a path between two ops only passes through ops between them, so a closure
/// taken within a stretch of the block is exact. Built once, it makes growing a group by a call
/// cost what the call adds to the stretch, not the whole stretch again.
class Dependences {
public:
  explicit Dependences(Block &block) {
    Roots roots;
    llvm::DenseMap<int, unsigned> lastWriter;
    llvm::DenseMap<int, llvm::SmallVector<unsigned, 4>> readers;
    std::optional<unsigned> lastCollective;
    fencesBefore_.push_back(0);
    for (Operation &op : block) {
      const unsigned i = static_cast<unsigned>(ops_.size());
      Effects e = effectsOf(&op, roots);
      llvm::SmallVector<unsigned, 8> preds;
      for (Value v : op.getOperands())
        if (Operation *def = v.getDefiningOp())
          if (auto it = index_.find(def); it != index_.end())
            preds.push_back(it->second);
      for (int r : e.reads)
        if (auto it = lastWriter.find(r); it != lastWriter.end())
          preds.push_back(it->second);
      for (int r : e.writes) {
        if (auto it = lastWriter.find(r); it != lastWriter.end())
          preds.push_back(it->second);
        if (auto it = readers.find(r); it != readers.end())
          llvm::append_range(preds, it->second);
      }
      if (e.collective) {
        if (lastCollective)
          preds.push_back(*lastCollective);
        lastCollective = i;
      }
      for (int r : e.reads)
        readers[r].push_back(i);
      for (int r : e.writes) {
        lastWriter[r] = i;
        readers[r].clear();
      }
      llvm::sort(preds);
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      predStart_.push_back(static_cast<unsigned>(predList_.size()));
      llvm::append_range(predList_, preds);
      index_[&op] = i;
      ops_.push_back(&op);
      fencesBefore_.push_back(fencesBefore_.back() + e.fence);
    }
    predStart_.push_back(static_cast<unsigned>(predList_.size()));
  }

  size_t size() const { return ops_.size(); }
  Operation *op(unsigned i) const { return ops_[i]; }
  unsigned indexOf(Operation *op) const { return index_.lookup(op); }
  ArrayRef<unsigned> preds(unsigned i) const {
    return ArrayRef<unsigned>(predList_).slice(predStart_[i], predStart_[i + 1] - predStart_[i]);
  }
  /// Whether an op between `a` and `b` (both excluded) is a fence, which nothing crosses.
  bool fenceBetween(unsigned a, unsigned b) const {
    return fencesBefore_[b] - fencesBefore_[a + 1] > 0;
  }

private:
  std::vector<Operation *> ops_;
  llvm::DenseMap<Operation *, unsigned> index_;
  std::vector<unsigned> predStart_, predList_;
  std::vector<unsigned> fencesBefore_;
};

/// A group of calls being grown in program order, with the ops of its stretch (first member to
/// last) that depend on a member ("later": they stay after the merged call) and those a member
/// depends on ("earlier": they move before it). An op that is both, or a member that depends on
/// another, ends the group.
class GroupScan {
public:
  GroupScan(const Dependences &deps, int64_t cap) : deps_(deps), cap_(cap), mark_(deps.size()) {}

  bool empty() const { return members_.empty(); }
  ArrayRef<plan::KernelOp> members() const { return members_; }

  /// Starts a group of one call.
  void start(plan::KernelOp call) {
    clear();
    first_ = last_ = deps_.indexOf(call);
    setMark(first_, Member);
    members_.push_back(call);
  }

  /// Adds `call` (after the last member) when the group with it can be merged and what moves
  /// before the merged call allocates at most the cap in bytes; leaves the group as it was
  /// otherwise.
  bool tryAdd(plan::KernelOp call) {
    const unsigned next = deps_.indexOf(call);
    if (deps_.fenceBetween(first_, next))
      return false;
    const size_t undo = touched_.size();
    auto fail = [&] {
      for (size_t i = undo; i < touched_.size(); ++i)
        mark_[touched_[i]] = None;
      touched_.resize(undo);
      return false;
    };
    // Forward over the ops the stretch gains: what depends on a member.
    for (unsigned i = last_ + 1; i < next; ++i)
      if (dependsOnGroup(i))
        setMark(i, Later);
    if (dependsOnGroup(next))
      return fail(); // The call reads or writes what a member writes.
    // Backward from the call: what it depends on within the stretch.
    int64_t bytes = bytes_;
    llvm::SmallVector<unsigned, 32> stack{next};
    while (!stack.empty()) {
      unsigned i = stack.pop_back_val();
      for (unsigned p : deps_.preds(i)) {
        if (p < first_ || mark_[p] == Earlier)
          continue;
        if (mark_[p] != None)
          return fail(); // Both before and after the merged call.
        setMark(p, Earlier);
        bytes += allocatedBytes(deps_.op(p));
        stack.push_back(p);
      }
    }
    if (bytes > cap_)
      return fail();
    setMark(next, Member);
    members_.push_back(call);
    last_ = next;
    bytes_ = bytes;
    return true;
  }

  /// The ops that move before the merged call, in program order.
  llvm::SmallVector<Operation *> before() const {
    llvm::SmallVector<Operation *> ops;
    for (unsigned i = first_; i <= last_; ++i)
      if (mark_[i] == Earlier)
        ops.push_back(deps_.op(i));
    return ops;
  }

private:
  enum Mark : uint8_t { None, Member, Later, Earlier };

  bool dependsOnGroup(unsigned i) const {
    return llvm::any_of(deps_.preds(i), [&](unsigned p) {
      return p >= first_ && (mark_[p] == Member || mark_[p] == Later);
    });
  }
  void setMark(unsigned i, Mark m) {
    mark_[i] = m;
    touched_.push_back(i);
  }
  void clear() {
    for (unsigned i : touched_)
      mark_[i] = None;
    touched_.clear();
    members_.clear();
    bytes_ = 0;
  }
  /// The bytes of the arena buffer `op` allocates, if it is an allocation: moved before a
  /// merged call, it stays alive until it.
  static int64_t allocatedBytes(Operation *op) {
    auto alloc = dyn_cast<plan::AllocOp>(op);
    if (!alloc)
      return 0;
    MemRefType t = alloc.getType();
    return t.getNumElements() * static_cast<int64_t>(t.getElementTypeBitWidth() / 8);
  }

  const Dependences &deps_;
  int64_t cap_;
  std::vector<Mark> mark_;
  std::vector<unsigned> touched_;
  llvm::SmallVector<plan::KernelOp> members_;
  unsigned first_ = 0, last_ = 0;
  int64_t bytes_ = 0;
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
    if (cap <= 0)
      cap = settings::parallelOf(module).getBucketBytes();
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
      // Merging one key's calls moves ops and replaces calls, so each key reads the block anew.
      Dependences deps(block);
      llvm::sort(calls, [&](plan::KernelOp a, plan::KernelOp b) {
        return deps.indexOf(a) < deps.indexOf(b);
      });
      GroupScan scan(deps, cap);
      for (plan::KernelOp k : calls) {
        if (!scan.empty() && scan.tryAdd(k))
          continue;
        if (!scan.empty())
          flush(scan);
        scan.start(k);
      }
      flush(scan);
    }
  }

  /// Moves what the scan's members depend on before the first and merges them (nothing for a
  /// group of one).
  void flush(const GroupScan &scan) {
    ArrayRef<plan::KernelOp> members = scan.members();
    if (members.size() < 2)
      return;
    for (Operation *op : scan.before())
      op->moveBefore(members.front());
    merge(members);
  }
};

} // namespace
