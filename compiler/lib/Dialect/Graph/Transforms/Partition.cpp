//===- Partition.cpp - Sharding propagation and partitioning --------------===//
//
// One walk serves two passes. Each function is visited in order; every value's sharding
// follows from its producer's ShardableOpInterface rule, given the shardings of the
// producer's operands. -tessel-shard-propagate only records them; -tessel-partition also
// rewrites each op on per-rank types, with the collectives that convert each operand into
// the sharding the op asked for.
//
// The passes never look at op kinds: what an op needs is its own rule's business, and every
// collective follows from two shardings meeting.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "common/layout/HeadTail.h"

#include "llvm/ADT/StringExtras.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <map>
#include <set>

namespace tessel {
#define GEN_PASS_DEF_SHARDPROPAGATE
#define GEN_PASS_DEF_PARTITION
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

NamedShape shapeOf(Type t) { return *getNamedShape(t); }

/// The module's layout, with the rules grouped-query attention implies. Attention reads each
/// key/value head with a group of query heads, so splitting the query heads splits the
/// key/value heads the same way: the rule carries over to them (and so to the key and value
/// projections), unless the spec maps them itself. The rules are written into the module's
/// `tessel.parallel`, where every later pass reads them.
MeshLayout layoutWithKeyValueRules(ModuleOp module) {
  settings::ParallelAttr parallel = settings::parallelOf(module);
  MeshLayout mesh(parallel);
  bool added = false;
  module.walk([&](Operation *op) {
    if (!isa<AttentionOp, PagedAttentionOp>(op))
      return;
    auto q = getNamedShape(op->getOperand(0).getType());
    auto k = getNamedShape(op->getOperand(1).getType());
    if (!q || !k || q->size() < 3 || k->size() != q->size())
      return;
    const NamedDim &heads = (*q)[q->size() - 2], &kvHeads = (*k)[k->size() - 2];
    std::string axis = mesh.ruleFor(heads.name);
    if (heads.name == kvHeads.name || axis.empty() || !mesh.ruleFor(kvHeads.name).empty() ||
        kvHeads.size % mesh.size(axis) != 0)
      return;
    parallel = parallel.withRule(kvHeads.name, axesOfSplit(axis));
    mesh = MeshLayout(parallel);
    added = true;
  });
  if (added)
    module->setAttr(settings::kParallelName, parallel);
  return mesh;
}

class Walker : public Partitioner {
public:
  Walker(ModuleOp module, bool rewrite)
      : module_(module), b_(module.getContext()), mesh_(layoutWithKeyValueRules(module)),
        rewrite_(rewrite) {}

  LogicalResult run();

  OpBuilder &builder() override { return b_; }
  const MeshLayout &mesh() const override { return mesh_; }
  Attribute paramInit(StringRef name) const override { return inits_.lookup(name); }
  std::map<std::string, Value> &memo() override { return memo_; }
  Type localType(Type type, const Sharding &s) const override;
  Value convert(Value value, Type globalType, const Sharding &from, const Sharding &to) override;

private:
  /// What the walk knows of an original value: its per-rank replacement (the value itself
  /// when only propagating), its sharding and its global type.
  struct Entry {
    Value local;
    Sharding sharding;
    Type global;
  };

  LogicalResult runOnFunction(func::FuncOp func);
  LogicalResult visit(Operation *op);
  void record(Operation *op, ArrayRef<Sharding> shardings);
  void recordStateLayouts();
  /// Records the shardings of an op created inside a rule's partition, from its operands'.
  void recordFromOperands(Operation *op);
  SmallVector<int16_t> gridAxes(ArrayRef<std::string> axes) const;

  ModuleOp module_;
  OpBuilder b_;
  MeshLayout mesh_;
  bool rewrite_;
  bool backward_ = false; ///< Whether the walk is past the loss of @forward_backward.
  DenseMap<Value, Entry> values_;
  std::map<std::pair<void *, std::string>, Value> conversions_;
  llvm::StringMap<Attribute> inits_;
  std::map<std::string, Type> params_; ///< Global types, for tessel.state.
  /// The decode programs' caches and running totals, for tessel.state.
  std::map<std::string, Sharding> caches_;
  std::set<std::string> warnedDims_;
  std::map<std::string, Value> memo_;

  /// Warns (once per dim) when an op needs a dim whole that the spec's rules split and an
  /// operand holds split: the layout then loses that parallelism there, e.g. attention under
  /// context parallelism, which reads whole sequences.
  void warnAboutWholeDims(Operation *op, ArrayRef<Sharding> actual, const ShardingRule &rule);
};

void Walker::warnAboutWholeDims(Operation *op, ArrayRef<Sharding> actual,
                                const ShardingRule &rule) {
  // A dim some operand keeps split (attention's queries under context parallelism, whose
  // keys are gathered) keeps its parallelism; so does an axis that splits another dim of the
  // op instead (a router's weight gathered while its tokens stay split over ep).
  std::set<std::pair<std::string, std::string>> keptSplit;
  std::set<std::string> usedAxes;
  for (auto [v, need] : llvm::zip(op->getOperands(), rule.operands))
    if (auto shape = getNamedShape(v.getType()))
      for (size_t d = 0; d < shape->size(); ++d)
        for (StringRef a : axesOfSplit(need.axes[d])) {
          keptSplit.insert({(*shape)[d].name, a.str()});
          usedAxes.insert(a.str());
        }
  for (auto [v, have, need] : llvm::zip(op->getOperands(), actual, rule.operands)) {
    auto shape = getNamedShape(v.getType());
    if (!shape)
      continue;
    for (size_t d = 0; d < shape->size(); ++d) {
      const std::string &dim = (*shape)[d].name;
      std::string axis = mesh_.ruleFor(dim);
      // State is never split over cp (MeshLayout::stateSharding): nothing is lost there.
      bool wholeState = axis == headtail::kAxis && isa<AccumulateGradOp>(op);
      // Lost are the axes (of a group: each) that split neither this dim nor another.
      auto kept = [&](StringRef a) {
        return keptSplit.count({dim, a.str()}) || usedAxes.count(a.str());
      };
      if (axis.empty() || have.axes[d] != axis || need.axes[d] == axis || wholeState ||
          llvm::any_of(axesOfSplit(axis), kept) || !warnedDims_.insert(dim).second)
        continue;
      std::string what = spelling(op);
      op->emitWarning() << "'" << dim << "' is split over " << axis << " by the spec, but "
                        << what << " needs it whole here, so it is gathered and " << what
                        << " runs unsplit on every " << axis << " rank";
    }
  }
}

Type Walker::localType(Type type, const Sharding &s) const {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  for (size_t i = 0; i < shape.size() && i < s.axes.size(); ++i)
    if (!s.axes[i].empty())
      shape[i] /= mesh_.size(s.axes[i]);
  return RankedTensorType::get(shape, t.getElementType(), t.getEncoding());
}

SmallVector<int16_t> Walker::gridAxes(ArrayRef<std::string> axes) const {
  SmallVector<int16_t> out;
  for (const std::string &split : axes)
    for (StringRef a : axesOfSplit(split))
      out.push_back(static_cast<int16_t>(mesh_.axisIndex(a)));
  llvm::sort(out);
  return out;
}

void Walker::record(Operation *op, ArrayRef<Sharding> shardings) {
  SmallVector<Attribute> attrs;
  for (const Sharding &s : shardings)
    attrs.push_back(getShardingAttr(op->getContext(), s));
  op->setAttr(kShardingAttr, b_.getArrayAttr(attrs));
}

Value Walker::convert(Value value, Type globalType, const Sharding &from, const Sharding &to) {
  if (from == to)
    return value;
  Location loc = value.getLoc();
  for (const std::string &axis : to.partial)
    if (!from.isPartialOver(axis)) {
      emitError(loc) << "a value laid out as " << from.str() << " cannot become " << to.str()
                     << ": only a computation can make a partial sum";
      return {};
    }
  // A conversion is made once and reused, but ZeRO-3 gathers a parameter once in the forward
  // pass and again in the backward pass, so that no gathered copy lives across the two.
  std::pair<void *, std::string> key{value.getAsOpaquePointer(), from.str() + " -> " + to.str()};
  if (mesh_.zeroStage() >= 3 && isa_and_nonnull<ParamOp>(value.getDefiningOp()) && backward_)
    key.second += " (backward)";
  if (auto it = conversions_.find(key); it != conversions_.end())
    return it->second;

  Sharding cur = from;
  Value v = value;
  auto emitted = [&](Value result) {
    record(result.getDefiningOp(), {cur});
    v = result;
  };
  // Partial sums: onto a dim the target splits over the same axis, a reduce-scatter; the
  // rest in one all-reduce after them (a value reduce-scattered over one axis stays partial
  // over the others until then).
  SmallVector<std::string> allReduce;
  for (const std::string &axis : from.partial) {
    if (to.isPartialOver(axis))
      continue;
    int dim = -1;
    for (size_t i = 0; i < to.axes.size(); ++i)
      if (to.axes[i] == axis && cur.axes[i].empty() && !cur.splitsOver(axis))
        dim = static_cast<int>(i);
    if (dim < 0) {
      allReduce.push_back(axis);
      continue;
    }
    llvm::erase(cur.partial, axis);
    cur.axes[dim] = axis;
    emitted(shard::ReduceScatterOp::create(
        b_, loc, localType(globalType, cur), FlatSymbolRefAttr::get(b_.getContext(), kGridName),
        b_.getDenseI16ArrayAttr(gridAxes({axis})), v,
        shard::ReductionKindAttr::get(b_.getContext(), shard::ReductionKind::Sum),
        b_.getIndexAttr(dim)));
  }
  for (const std::string &axis : allReduce)
    llvm::erase(cur.partial, axis);
  if (!allReduce.empty())
    emitted(shard::AllReduceOp::create(b_, loc, localType(globalType, cur), kGridName,
                                       gridAxes(allReduce), v, shard::ReductionKind::Sum));
  // A split that moves from dim i to dim j (j whole before, i whole after) is one all-to-all:
  // each rank sends every other the block of dim j that rank will hold and gets back its own
  // block of dim j from every block of dim i, so nothing is ever held whole. The axes that
  // move may be the innermost of a group: dim i keeps its outer axes, and dim j may already
  // be split over others, outside them (tokens split over (dp, ep) keep dp while ep moves to
  // the experts, and back). Not over cp, whose head-tail blocks are not the all-to-all's.
  for (size_t i = 0; i < cur.axes.size(); ++i) {
    SmallVector<StringRef, 2> group = axesOfSplit(cur.axes[i]), kept = axesOfSplit(to.axes[i]);
    if (group.empty() || kept.size() >= group.size() ||
        ArrayRef(group).take_front(kept.size()) != ArrayRef(kept) ||
        splitsOver(cur.axes[i], headtail::kAxis))
      continue;
    std::string moving = llvm::join(ArrayRef(group).drop_front(kept.size()), "_");
    for (size_t j = 0; j < cur.axes.size(); ++j) {
      std::string joined = cur.axes[j].empty() ? moving : cur.axes[j] + "_" + moving;
      if (j == i || to.axes[j] != joined)
        continue;
      cur.axes[i] = to.axes[i];
      cur.axes[j] = joined;
      emitted(shard::AllToAllOp::create(b_, loc, localType(globalType, cur), kGridName,
                                        gridAxes({moving}), v, APInt(64, j), APInt(64, i)));
      break;
    }
  }
  // Splits the target lacks (or has on another axis) are gathered, then new ones sliced.
  for (size_t i = 0; i < cur.axes.size(); ++i) {
    if (cur.axes[i].empty() || cur.axes[i] == to.axes[i])
      continue;
    std::string axis = cur.axes[i];
    cur.axes[i].clear();
    emitted(shard::AllGatherOp::create(b_, loc, localType(globalType, cur), kGridName,
                                       gridAxes({axis}), v, APInt(64, i)));
  }
  for (size_t i = 0; i < cur.axes.size(); ++i) {
    if (to.axes[i].empty() || cur.axes[i] == to.axes[i])
      continue;
    cur.axes[i] = to.axes[i];
    emitted(shard::AllSliceOp::create(
        b_, loc, localType(globalType, cur), FlatSymbolRefAttr::get(b_.getContext(), kGridName),
        b_.getDenseI16ArrayAttr(gridAxes({to.axes[i]})), v, b_.getIndexAttr(i)));
  }
  conversions_[key] = v;
  return v;
}

LogicalResult Walker::visit(Operation *op) {
  auto shardable = dyn_cast<ShardableOpInterface>(op);
  if (!shardable)
    return op->emitOpError("has no sharding rule (ShardableOpInterface)");
  SmallVector<Sharding> actual;
  for (Value v : op->getOperands())
    actual.push_back(values_.lookup(v).sharding);
  ShardingRule rule;
  if (failed(shardable.inferSharding(mesh_, actual, rule)))
    return failure();
  if (rule.operands.size() != op->getNumOperands() || rule.results.size() != op->getNumResults())
    return op->emitOpError("has a sharding rule with the wrong number of entries");
  if (auto p = dyn_cast<ParamOp>(op)) {
    inits_[p.getName()] = p.getInit();
    params_[p.getName().str()] = p.getType();
  }
  if (auto c = dyn_cast<KvCacheOp>(op))
    caches_[c.getName().str()] = rule.results[0];
  if (auto t = dyn_cast<RunningTotalsOp>(op))
    caches_[t.getName().str()] = rule.results[0];
  // The sampler and the decode programs run a few sequences, which no data axis may split:
  // what they gather says nothing of the training layout the warning is about.
  StringRef function = op->getParentOfType<func::FuncOp>().getSymName();
  if (function != "sample" && function != "prefill" && !function.starts_with("decode_b"))
    warnAboutWholeDims(op, actual, rule);

  if (!rewrite_) {
    record(op, rule.results);
    for (auto [r, s] : llvm::zip(op->getResults(), rule.results))
      values_[r] = {r, s, r.getType()};
    return success();
  }

  b_.setInsertionPoint(op);
  SmallVector<Value> operands;
  for (auto [v, need] : llvm::zip(op->getOperands(), rule.operands)) {
    const Entry &e = values_[v];
    Value converted = convert(e.local, e.global, e.sharding, need);
    if (!converted)
      return op->emitOpError("cannot take operand #")
             << operands.size() << " laid out as " << e.sharding.str() << " in the layout "
             << need.str() << " it needs";
    operands.push_back(converted);
  }
  SmallVector<Value> results;
  Operation *before = op->getPrevNode();
  if (failed(shardable.partition(*this, operands, rule, results)))
    return failure();
  if (results.size() != op->getNumResults())
    return op->emitOpError("partitioned into the wrong number of results");
  for (auto [i, r] : llvm::enumerate(results)) {
    Operation *def = r.getDefiningOp();
    if (def && def->getNumResults() == 1)
      record(def, {rule.results[i]});
    else if (def && i == 0)
      record(def, rule.results);
    values_[op->getResult(i)] = {r, rule.results[i], op->getResult(i).getType()};
  }
  // Intermediate ops a rule's partition created record their own shardings.
  for (Operation *n = before ? before->getNextNode() : &op->getBlock()->front(); n != op;
       n = n->getNextNode())
    if (!n->hasAttr(kShardingAttr))
      recordFromOperands(n);
  return success();
}

void Walker::recordFromOperands(Operation *n) {
  SmallVector<Sharding> ins;
  for (Value v : n->getOperands())
    ins.push_back(recordedSharding(v).value_or(Sharding::replicated(shapeOf(v.getType()).size())));
  if (auto ar = dyn_cast<shard::AllReduceOp>(n)) {
    Sharding out = ins[0];
    for (int16_t a : ar.getGridAxes())
      llvm::erase(out.partial, mesh_.axes()[a].first);
    record(n, {out});
    return;
  }
  ShardingRule rule;
  if (auto s = dyn_cast<ShardableOpInterface>(n); s && succeeded(s.inferSharding(mesh_, ins, rule)))
    record(n, rule.results);
}

LogicalResult Walker::runOnFunction(func::FuncOp func) {
  values_.clear();
  conversions_.clear();
  memo_.clear();
  backward_ = false;
  Block &body = func.getBody().front();
  // Per-rank arguments are added beside the global ones, which the original ops (and the
  // rules reading their types) keep using until they are erased.
  unsigned globals = func.getNumArguments();
  for (unsigned i = 0; i < globals; ++i) {
    BlockArgument arg = body.getArgument(i);
    Type global = arg.getType();
    Sharding s = mesh_.byRules(shapeOf(global));
    func.setArgAttr(i, kShardingAttr, getShardingAttr(func.getContext(), s));
    Value local = arg;
    if (rewrite_) {
      if (failed(func.insertArgument(globals + i, localType(global, s), func.getArgAttrDict(i),
                                     arg.getLoc())))
        return failure();
      local = body.getArgument(globals + i);
    }
    values_[arg] = {local, s, global};
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  // The backward pass starts after the op computing the returned loss.
  Operation *loss = nullptr;
  if (func.getName() == "forward_backward" && body.getTerminator()->getNumOperands())
    loss = body.getTerminator()->getOperand(0).getDefiningOp();
  for (Operation *op : ops) {
    if (failed(visit(op)))
      return failure();
    backward_ |= op == loss;
  }
  if (!rewrite_)
    return success();

  // Every rank returns the whole result.
  Operation *ret = body.getTerminator();
  b_.setInsertionPoint(ret);
  SmallVector<Type> resultTypes;
  for (OpOperand &use : ret->getOpOperands()) {
    const Entry &e = values_[use.get()];
    Value whole =
        convert(e.local, e.global, e.sharding, Sharding::replicated(shapeOf(e.global).size()));
    if (!whole)
      return failure();
    use.set(whole);
    resultTypes.push_back(whole.getType());
  }
  for (Operation *op : llvm::reverse(ops)) {
    op->dropAllUses();
    op->erase();
  }
  llvm::BitVector old(func.getNumArguments());
  old.set(0, globals);
  if (failed(func.eraseArguments(old)))
    return failure();
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(), resultTypes));
  return success();
}

void Walker::recordStateLayouts() {
  SmallVector<NamedAttribute> entries;
  MLIRContext *ctx = module_.getContext();
  for (const auto &[name, type] : params_) {
    NamedShape shape = shapeOf(type);
    entries.push_back(b_.getNamedAttr(
        name, b_.getDictionaryAttr(
                  {b_.getNamedAttr(
                       "param", getShardingAttr(ctx, mesh_.stateSharding(shape, StateRole::Param))),
                   b_.getNamedAttr(
                       "grad", getShardingAttr(ctx, mesh_.stateSharding(shape, StateRole::Grad))),
                   b_.getNamedAttr(
                       "optimizer",
                       getShardingAttr(ctx, mesh_.stateSharding(shape, StateRole::Optimizer)))})));
  }
  for (const auto &[name, sharding] : caches_)
    entries.push_back(b_.getNamedAttr(
        name, b_.getDictionaryAttr({b_.getNamedAttr("cache", getShardingAttr(ctx, sharding))})));
  module_->setAttr("tessel.state", b_.getDictionaryAttr(entries));
}

LogicalResult Walker::run() {
  if (mesh_.isTrivial())
    return success();
  for (auto func : module_.getOps<func::FuncOp>())
    if (failed(runOnFunction(func)))
      return failure();
  if (rewrite_) {
    SmallVector<int64_t> shape;
    for (const auto &axis : mesh_.axes())
      shape.push_back(axis.second);
    b_.setInsertionPointToStart(module_.getBody());
    shard::GridOp::create(b_, module_.getLoc(), kGridName, shape);
  }
  recordStateLayouts();
  return success();
}

struct ShardPropagate : tessel::impl::ShardPropagateBase<ShardPropagate> {
  void runOnOperation() override {
    if (failed(Walker(getOperation(), /*rewrite=*/false).run()))
      signalPassFailure();
  }
};

struct Partition : tessel::impl::PartitionBase<Partition> {
  void runOnOperation() override {
    if (failed(Walker(getOperation(), /*rewrite=*/true).run()))
      signalPassFailure();
  }
};

} // namespace
