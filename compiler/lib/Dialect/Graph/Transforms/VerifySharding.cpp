//===- VerifySharding.cpp - Consistency of a partitioned module -----------===//
//
// Checks the invariants every partitioned module must keep, independently of how the
// partition pass reached it: a rank never combines values split differently along one dim,
// never feeds a partial sum to an op that is not linear in it, and every collective
// converts between exactly the shardings on its two sides.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Graph/Transforms/Passes.h"

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "llvm/ADT/StringExtras.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <map>
#include <set>

namespace tessel {
#define GEN_PASS_DEF_VERIFYSHARDING
#include "tessel/Dialect/Graph/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

class Verifier {
public:
  explicit Verifier(ModuleOp module) : mesh_(MeshLayout::fromModule(module)) {
    if (auto state = module->getAttrOfType<DictionaryAttr>("tessel.state"))
      for (NamedAttribute e : state)
        if (auto d = dyn_cast<DictionaryAttr>(e.getValue()))
          if (auto g = d.getAs<ShardingAttr>("grad"))
            gradPartial_[e.getName().str()] = getSharding(g).partial;
  }

  LogicalResult verifyFunction(func::FuncOp func);

private:
  std::optional<Sharding> shardingOf(Value v, Operation *user);
  LogicalResult verifyCollective(Operation *op, const Sharding &in, const Sharding &out);
  LogicalResult verifyComputation(Operation *op, ArrayRef<Sharding> ins, ArrayRef<Sharding> outs);
  std::string axisName(int16_t index) const {
    auto axes = mesh_.axes();
    return index >= 0 && static_cast<size_t>(index) < axes.size() ? axes[index].first : "?";
  }

  MeshLayout mesh_;
  std::map<std::string, SmallVector<std::string, 2>> gradPartial_;
};

std::optional<Sharding> Verifier::shardingOf(Value v, Operation *user) {
  std::optional<Sharding> recorded = recordedSharding(v);
  if (!recorded) {
    user->emitOpError("uses a value without a recorded sharding");
    return std::nullopt;
  }
  Sharding s = *recorded;
  auto shape = getNamedShape(v.getType());
  if (shape && s.axes.size() != shape->size()) {
    user->emitOpError("uses a value whose sharding ")
        << s.str() << " does not fit its " << shape->size() << " dims";
    return std::nullopt;
  }
  std::set<std::string> used;
  for (const std::string &a : s.splitAxes())
    if (!used.insert(a).second || s.isPartialOver(a)) {
      user->emitOpError("uses a value laid out as ")
          << s.str() << ", which uses axis '" << a << "' twice";
      return std::nullopt;
    }
  return s;
}

LogicalResult Verifier::verifyCollective(Operation *op, const Sharding &in, const Sharding &out) {
  auto fail = [&](StringRef why) {
    return op->emitOpError() << why << " (operand " << in.str() << ", result " << out.str() << ")";
  };
  auto axesOf = [&](ArrayRef<int16_t> indices) {
    SmallVector<std::string> names;
    for (int16_t i : indices)
      names.push_back(axisName(i));
    return names;
  };
  // The axes of a gather, scatter or slice split a dim together, as a group.
  auto groupOf = [&](ArrayRef<int16_t> indices) { return llvm::join(axesOf(indices), "_"); };
  Sharding expect = in;
  if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
    for (const std::string &a : axesOf(ar.getGridAxes())) {
      if (!in.isPartialOver(a))
        return fail("reduces over '" + a + "', but its operand is not partial over it");
      llvm::erase(expect.partial, a);
    }
  } else if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
    std::string a = groupOf(rs.getGridAxes());
    uint64_t d = rs.getScatterAxis().getZExtValue();
    if (!in.isPartialOver(a) || d >= in.axes.size() || !in.axes[d].empty())
      return fail("scatters a sum over '" + a +
                  "' onto a dim that is split or a non-partial value");
    for (const std::string &axis : axesOf(rs.getGridAxes()))
      llvm::erase(expect.partial, axis);
    expect.axes[d] = a;
  } else if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
    std::string a = groupOf(ag.getGridAxes());
    uint64_t d = ag.getGatherAxis().getZExtValue();
    if (d >= in.axes.size() || in.axes[d] != a)
      return fail("gathers a dim over '" + a + "' that its operand does not split over it");
    expect.axes[d].clear();
  } else if (auto sl = dyn_cast<shard::AllSliceOp>(op)) {
    std::string a = groupOf(sl.getGridAxes());
    uint64_t d = sl.getSliceAxis().getZExtValue();
    if (d >= in.axes.size() || !in.axes[d].empty() || in.isPartialOver(a))
      return fail("slices a dim over '" + a + "' that is split already, or a partial sum");
    expect.axes[d] = a;
  } else if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
    // It moves the innermost axes of one dim's split (all of them, or those of a group whose
    // outer axes stay) to another dim, innermost there too.
    std::string a = groupOf(a2a.getGridAxes());
    uint64_t from = a2a.getConcatAxis().getZExtValue(), to = a2a.getSplitAxis().getZExtValue();
    StringRef held = from < in.axes.size() ? StringRef(in.axes[from]) : StringRef();
    bool innermost = held == a || held.ends_with("_" + a);
    if (to >= in.axes.size() || from == to || !innermost || in.isPartialOver(a) ||
        splitsOver(in.axes[to], a))
      return fail("moves a split over '" + a +
                  "' from a dim its operand does not split over it innermost, or onto a dim "
                  "split over it");
    expect.axes[from] = held.drop_back(std::min(held.size(), a.size() + 1)).str();
    expect.axes[to] = in.axes[to].empty() ? a : in.axes[to] + "_" + a;
  } else {
    return op->emitOpError("is a collective the verifier does not know");
  }
  if (expect != out)
    return fail("has a result sharding other than its operand's after the collective");
  return success();
}

/// Whether `scale` may multiply (or divide) a partial sum over `axes`: each rank's addend
/// scaled by the same factor sums to the scaled total, so the factor must be whole and the
/// same on the ranks of those axes (a mean over a split dim is the sum of such addends).
static bool isCommonFactor(const Sharding &scale, ArrayRef<std::string> axes) {
  if (scale.isPartial())
    return false;
  return llvm::none_of(scale.splitAxes(),
                       [&](const std::string &a) { return llvm::is_contained(axes, a); });
}

/// The op whose sum over a split dim made `v` a partial sum, looking through the linear ops
/// that passed it on; or null.
static Operation *partialSumOrigin(Value v) {
  Operation *def = v.getDefiningOp();
  while (def && isa<AddOp, SubOp, MulOp, DivOp, UnaryGradOp>(def)) {
    Value next;
    for (Value in : def->getOperands())
      if (auto s = recordedSharding(in); s && s->isPartial())
        next = in;
    if (!next)
      break;
    def = next.getDefiningOp();
  }
  return def;
}

/// "the result of `mean` over 'embed'", or "a value" when the origin is unknown.
static std::string describeSum(Operation *origin) {
  if (!origin)
    return "a value";
  std::string out = "the result of " + spelling(origin);
  ArrayAttr dims = isa<ContractOp>(origin) ? cast<ContractOp>(origin).getSum()
                                           : origin->getAttrOfType<ArrayAttr>("dims");
  if (!dims || dims.empty())
    return out;
  SmallVector<std::string> names;
  for (Attribute d : dims)
    names.push_back("'" + cast<StringAttr>(d).str() + "'");
  return out + " over " + llvm::join(names, ", ");
}

LogicalResult Verifier::verifyComputation(Operation *op, ArrayRef<Sharding> ins,
                                          ArrayRef<Sharding> outs) {
  // Partial sums only where the op is linear in them.
  // A rename moves no data, so it is linear in its operand too.
  bool linear = isa<AddOp, SubOp, TiedGradSumOp, RenameOp>(op);
  for (auto [i, s] : llvm::enumerate(ins)) {
    if (!s.isPartial())
      continue;
    bool allowed = false;
    bool samePartialResult = !outs.empty() && outs[0].partial == s.partial;
    if (linear)
      allowed = llvm::all_of(ins, [&](const Sharding &o) { return o.partial == s.partial; }) &&
                samePartialResult;
    else if (isa<MulOp>(op) || (isa<DivOp>(op) && i == 0))
      allowed = samePartialResult && isCommonFactor(ins[1 - i], s.partial);
    else if (isa<UnaryGradOp>(op) && i == 2) // dy * f'(x): linear in dy.
      allowed = samePartialResult && isCommonFactor(ins[0], s.partial) &&
                isCommonFactor(ins[1], s.partial);
    else if (auto acc = dyn_cast<AccumulateGradOp>(op))
      allowed = gradPartial_[acc.getName().str()] == s.partial;
    else if (isa<PackOp>(op))
      allowed = true;
    if (allowed)
      continue;
    // Said in the spec's terms: which sum, over which dim the layout splits, read by what.
    Operation *origin = partialSumOrigin(op->getOperand(i));
    std::string axes = llvm::join(s.partial, ", ");
    return op->emitError() << describeSum(origin) << ", which the layout splits over " << axes
                           << ", is used as a whole value by " << spelling(op) << ", but each "
                           << axes << " rank holds only its part of the sum";
  }
  if (isa<PackOp, SumSquaresOp, UnpackOp>(op))
    return success();
  // A sum over a split dim leaves each rank an addend: the result must say so.
  std::vector<std::string> summed;
  if (auto c = dyn_cast<ContractOp>(op))
    for (Attribute d : c.getSum())
      summed.push_back(cast<StringAttr>(d).str());
  else if (isa<SumOp, MeanOp>(op))
    for (Attribute d : op->getAttrOfType<ArrayAttr>("dims"))
      summed.push_back(cast<StringAttr>(d).str());
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    auto shape = getNamedShape(v.getType());
    for (const std::string &d : summed)
      if (int at = shape ? findDim(*shape, d) : -1;
          at >= 0 && !ins[i].axes[at].empty() && !outs[0].isPartialOver(ins[i].axes[at]))
        return op->emitOpError() << "sums over dim '" << d << "', split over '" << ins[i].axes[at]
                                 << "', but its result is not recorded as partial over it";
  }
  // One dim name, one split, across operands and results.
  std::map<std::string, std::string> split;
  auto check = [&](Value v, const Sharding &s, StringRef what, size_t index) -> LogicalResult {
    auto shape = getNamedShape(v.getType());
    if (!shape)
      return success();
    for (size_t d = 0; d < shape->size(); ++d) {
      auto [it, fresh] = split.insert({(*shape)[d].name, s.axes[d]});
      if (!fresh && it->second != s.axes[d])
        return op->emitOpError() << what << " #" << index << " splits dim '" << (*shape)[d].name
                                 << "' over '" << (s.axes[d].empty() ? "*" : s.axes[d])
                                 << "' where another operand splits it over '"
                                 << (it->second.empty() ? "*" : it->second) << "'";
    }
    return success();
  };
  // Attention under context parallelism reads its rank's block of the queries' sequence
  // against every key: keys and values (operands 1 and 2, and the gradient's results 1 and 2)
  // are held whole, and checked apart from the queries.
  bool wholeKeys = isa<AttentionOp, AttentionGradOp>(op) && op->hasAttr("seq_over");
  auto isKeySide = [&](size_t i) { return wholeKeys && (i == 1 || i == 2); };
  auto isKeySideResult = [&](size_t i) { return isKeySide(i) && isa<AttentionGradOp>(op); };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (!isKeySide(i) && failed(check(v, ins[i], "operand", i)))
      return failure();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (!isKeySideResult(i) && failed(check(v, outs[i], "result", i)))
      return failure();
  if (!wholeKeys)
    return success();
  split.clear();
  for (size_t i : {1, 2})
    if (failed(check(op->getOperand(i), ins[i], "operand", i)) ||
        (isKeySideResult(i) && failed(check(op->getResult(i), outs[i], "result", i))))
      return failure();
  return success();
}

LogicalResult Verifier::verifyFunction(func::FuncOp func) {
  for (Operation &op : func.getBody().front()) {
    SmallVector<Sharding> ins, outs;
    for (Value v : op.getOperands()) {
      auto s = shardingOf(v, &op);
      if (!s)
        return failure();
      ins.push_back(*s);
    }
    if (isa<func::ReturnOp>(op)) {
      for (auto [i, s] : llvm::enumerate(ins)) {
        // A result that declares its layout (a value one pipeline piece passes the next) is
        // per-rank as declared; any other every rank returns whole.
        if (auto declared = func.getResultAttrOfType<ShardingAttr>(i, kShardingAttr)) {
          if (getSharding(declared) != s)
            return op.emitOpError("returns result #")
                   << i << " laid out as " << s.str() << ", not as its declared "
                   << getSharding(declared).str();
          continue;
        }
        if (s.isPartial() || !s.splitAxes().empty())
          return op.emitOpError("returns result #")
                 << i << " laid out as " << s.str() << "; every rank must return it whole";
      }
      continue;
    }
    for (Value r : op.getResults()) {
      auto s = shardingOf(r, &op);
      if (!s)
        return failure();
      outs.push_back(*s);
    }
    if (op.getDialect() && op.getDialect()->getNamespace() == "shard") {
      if (ins.size() != 1 || outs.size() != 1)
        return op.emitOpError("is a collective of an unexpected form");
      if (failed(verifyCollective(&op, ins[0], outs[0])))
        return failure();
      continue;
    }
    if (failed(verifyComputation(&op, ins, outs)))
      return failure();
  }
  return success();
}

struct VerifySharding : tessel::impl::VerifyShardingBase<VerifySharding> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (MeshLayout::fromModule(module).isTrivial())
      return;
    Verifier verifier(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(verifier.verifyFunction(func)))
        return signalPassFailure();
  }
};

} // namespace
