//===- GraphSharding.cpp - Shardings, the mesh layout and the dim solver --===//

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "common/layout/HeadTail.h"
#include "common/mesh/MeshAxes.h"

#include "llvm/ADT/StringExtras.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <algorithm>
#include <set>

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

SmallVector<StringRef, 2> tessel::graph::axesOfSplit(StringRef split) {
  SmallVector<StringRef, 2> out;
  if (!split.empty())
    split.split(out, '_');
  return out;
}

bool tessel::graph::splitsOver(StringRef split, StringRef axis) {
  return llvm::is_contained(axesOfSplit(split), axis);
}

bool Sharding::isPartialOver(StringRef axis) const {
  SmallVector<StringRef, 2> group = axesOfSplit(axis);
  return !group.empty() &&
         llvm::all_of(group, [&](StringRef a) { return llvm::is_contained(partial, a.str()); });
}

void Sharding::addPartial(StringRef axis) {
  for (StringRef a : axesOfSplit(axis))
    if (!llvm::is_contained(partial, a.str()))
      partial.push_back(a.str());
  llvm::sort(partial);
}

bool Sharding::splitsOver(StringRef axis) const {
  return llvm::any_of(axes, [&](const std::string &s) { return graph::splitsOver(s, axis); });
}

SmallVector<std::string, 4> Sharding::splitAxes() const {
  SmallVector<std::string, 4> out;
  for (const std::string &s : axes)
    for (StringRef a : axesOfSplit(s))
      out.push_back(a.str());
  return out;
}

std::string Sharding::str() const {
  std::string out = "[";
  for (size_t i = 0; i < axes.size(); ++i)
    out += (i ? ", " : "") + (axes[i].empty() ? std::string("*") : axes[i]);
  out += "]";
  if (!partial.empty()) {
    out += " partial [";
    for (size_t i = 0; i < partial.size(); ++i)
      out += (i ? ", " : "") + partial[i];
    out += "]";
  }
  return out;
}

ShardingAttr tessel::graph::getShardingAttr(MLIRContext *ctx, const Sharding &s) {
  SmallVector<StringAttr> axes, partial;
  for (const std::string &a : s.axes)
    axes.push_back(StringAttr::get(ctx, a));
  for (const std::string &a : s.partial)
    partial.push_back(StringAttr::get(ctx, a));
  return ShardingAttr::get(ctx, axes, partial);
}

Sharding tessel::graph::getSharding(ShardingAttr attr) {
  Sharding s;
  for (StringAttr a : attr.getAxes())
    s.axes.push_back(a.str());
  for (StringAttr a : attr.getPartial())
    s.partial.push_back(a.str());
  return s;
}

// #graph.sharding<[dp, *, tp] partial [tp]>
static ParseResult parseAxisList(AsmParser &parser, SmallVectorImpl<StringAttr> &out,
                                 bool allowWhole) {
  if (parser.parseLSquare())
    return failure();
  if (succeeded(parser.parseOptionalRSquare()))
    return success();
  do {
    if (allowWhole && succeeded(parser.parseOptionalStar())) {
      out.push_back(StringAttr::get(parser.getContext(), ""));
      continue;
    }
    std::string axis;
    if (parser.parseKeywordOrString(&axis))
      return failure();
    out.push_back(StringAttr::get(parser.getContext(), axis));
  } while (succeeded(parser.parseOptionalComma()));
  return parser.parseRSquare();
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> axes, partial;
  if (parser.parseLess() || parseAxisList(parser, axes, /*allowWhole=*/true))
    return {};
  if (succeeded(parser.parseOptionalKeyword("partial")) &&
      parseAxisList(parser, partial, /*allowWhole=*/false))
    return {};
  if (parser.parseGreater())
    return {};
  return ShardingAttr::get(parser.getContext(), axes, partial);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<" << getSharding(*this).str() << ">";
}

//===----------------------------------------------------------------------===//
// MeshLayout
//===----------------------------------------------------------------------===//

MeshLayout::MeshLayout(settings::ParallelAttr parallel) {
  for (std::string_view axis : mesh::kMeshAxes)
    if (int64_t size = parallel.axisSize(llvm::StringRef(axis.data(), axis.size())); size > 1)
      axes_.push_back({std::string(axis), size});
  // A dim mapped to several axes is split over their group, outermost first whatever order
  // the spec lists them in (the front end accepts only groups of data axes).
  for (NamedAttribute rule : parallel.getShard()) {
    SmallVector<int16_t> group;
    for (StringRef axis : parallel.axesOf(rule.getName().getValue()))
      if (size(axis) > 1)
        group.push_back(static_cast<int16_t>(axisIndex(axis)));
    if (!group.empty())
      rules_[rule.getName().str()] = groupName(group);
  }
  sequenceParallel_ = parallel.getSequenceParallel() && size("tp") > 1;
  zero_ = size("dp") > 1 ? static_cast<int>(parallel.getZero()) : 0;
  contextRing_ = parallel.getContextAttention() == settings::ContextMode::Ring;
}

MeshLayout MeshLayout::fromModule(ModuleOp module) {
  return MeshLayout(settings::parallelOf(module));
}

int64_t MeshLayout::size(StringRef axis) const {
  int64_t n = 1;
  for (StringRef a : axesOfSplit(axis))
    for (const auto &[name, size] : axes_)
      if (name == a)
        n *= size;
  return n;
}

int64_t MeshLayout::worldSize() const {
  int64_t n = 1;
  for (const auto &a : axes_)
    n *= a.second;
  return n;
}

int MeshLayout::axisIndex(StringRef axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].first == axis)
      return static_cast<int>(i);
  return -1;
}

std::string MeshLayout::groupName(ArrayRef<int16_t> gridAxes) const {
  SmallVector<int16_t> sorted(gridAxes.begin(), gridAxes.end());
  llvm::sort(sorted);
  std::string name;
  for (int16_t a : sorted)
    name += (name.empty() ? "" : "_") + axes_[a].first;
  return name;
}

std::string MeshLayout::ruleFor(StringRef dim) const {
  auto it = rules_.find(dim.str());
  return it == rules_.end() ? std::string() : it->second;
}

Sharding MeshLayout::byRules(const NamedShape &shape) const {
  Sharding s = Sharding::replicated(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    std::string axis = ruleFor(shape[i].name);
    if (axis.empty() || shape[i].size % size(axis) != 0 ||
        llvm::any_of(axesOfSplit(axis), [&](StringRef a) { return s.splitsOver(a); }))
      continue;
    s.axes[i] = axis;
  }
  return s;
}

int MeshLayout::zeroDim(const NamedShape &globalShape, const Sharding &s) const {
  int64_t dp = size("dp");
  if (dp == 1 || s.splitsOver("dp"))
    return -1;
  for (size_t i = 0; i < globalShape.size(); ++i)
    if (s.axes[i].empty() && globalShape[i].size % dp == 0)
      return static_cast<int>(i);
  return -1;
}

Sharding MeshLayout::stateSharding(const NamedShape &paramShape, StateRole role) const {
  Sharding p = byRules(paramShape);
  // Context parallelism splits activations, not state: a parameter along the sequence (learned
  // positions) is held whole and sliced where it meets the split activations (a head-tail
  // block would not be one checkpoint shard either).
  for (std::string &axis : p.axes)
    if (axis == headtail::kAxis)
      axis.clear();
  if (zero_ == 0)
    return p;
  Sharding z = p;
  if (int d = zeroDim(paramShape, p); d >= 0)
    z.axes[d] = "dp";
  switch (role) {
  case StateRole::Param:
    return zero_ >= 3 ? z : p;
  case StateRole::Grad:
    if (zero_ >= 2)
      return z;
    p.addPartial("dp");
    return p;
  case StateRole::Optimizer:
    return z;
  }
  return p;
}

Sharding MeshLayout::reducedForm(const NamedShape &globalShape, const Sharding &s) const {
  Sharding out = s;
  out.partial.clear();
  // Context parallelism: the key and value gradients of every cp rank's queries are
  // reduce-scattered back onto the sequence the spec splits over cp.
  std::string cp(headtail::kAxis);
  if (s.isPartialOver(cp) && !s.splitsOver(cp))
    for (size_t d = 0; d < globalShape.size(); ++d)
      if (ruleFor(globalShape[d].name) == cp && s.axes[d].empty() &&
          globalShape[d].size % (2 * size(cp)) == 0) {
        out.axes[d] = cp;
        break;
      }
  if (sequenceParallel_ && s.isPartialOver("tp") && !s.splitsOver("tp")) {
    int seq = findDim(globalShape, "seq");
    if (seq >= 0 && s.axes[seq].empty() && globalShape[seq].size % size("tp") == 0)
      out.axes[seq] = "tp";
  }
  return out;
}

//===----------------------------------------------------------------------===//
// DimSolver
//===----------------------------------------------------------------------===//

void DimSolver::addOperand(const NamedShape &shape, const Sharding &actual, bool keepPartial) {
  Sharding splits = actual;
  splits.partial.clear();
  operands_.push_back(
      {shape, actual.isPartial() && !keepPartial ? mesh_.reducedForm(shape, actual) : splits});
  keptPartial_.push_back(keepPartial ? actual.partial : llvm::SmallVector<std::string, 2>());
  parameter_.push_back(false);
}

void DimSolver::addParameter(const NamedShape &shape, const Sharding &actual) {
  addOperand(shape, actual);
  parameter_.back() = true;
}

bool DimSolver::holdsInPlace(size_t k, size_t i) const {
  const auto &[shape, s] = operands_[k];
  if (!parameter_[k])
    return false;
  const std::string &dim = shape[i].name, &axis = s.axes[i];
  // Held in place over a dim the op sums, the weight would make the result a partial sum
  // still to be reduced, on top of the activation it moved.
  if (llvm::is_contained(summed_, dim))
    return false;
  // Each operand holding these axes on another dim must have the parameter's dim, to be
  // resharded onto it, and hold them innermost, so that it keeps a split of its outer axes.
  SmallVector<StringRef, 2> mine = axesOfSplit(axis);
  for (size_t m = 0; m < operands_.size(); ++m) {
    const auto &[other, os] = operands_[m];
    for (size_t j = 0; m != k && j < other.size(); ++j) {
      SmallVector<StringRef, 2> held = axesOfSplit(os.axes[j]);
      if (other[j].name == dim ||
          llvm::none_of(mine, [&](StringRef a) { return llvm::is_contained(held, a); }))
        continue;
      if (findDim(other, dim) < 0 || held.size() < mine.size() ||
          ArrayRef(held).take_back(mine.size()) != ArrayRef(mine))
        return false;
    }
  }
  return true;
}

void DimSolver::keepWholeAll(const NamedShape &shape) {
  for (const NamedDim &d : shape)
    keepWhole(d.name);
}

void DimSolver::prefer(StringRef dim, int64_t size) { preferred_.push_back({dim.str(), size}); }

void DimSolver::solve(ShardingRule &rule) {
  struct Candidate {
    int priority;
    std::string dim, axis;
    int64_t size;
  };
  // The ranks of the class comment, from 0.
  enum { kParamInPlace, kKept, kSummed, kParamMoved, kNotByRules };
  SmallVector<Candidate> candidates;
  for (size_t k = 0; k < operands_.size(); ++k) {
    const auto &[shape, s] = operands_[k];
    for (size_t i = 0; i < shape.size(); ++i) {
      if (s.axes[i].empty())
        continue;
      int priority = kNotByRules;
      if (mesh_.ruleFor(shape[i].name) == s.axes[i])
        priority = holdsInPlace(k, i)                           ? kParamInPlace
                   : parameter_[k]                              ? kParamMoved
                   : llvm::is_contained(summed_, shape[i].name) ? kSummed
                                                                : kKept;
      candidates.push_back({priority, shape[i].name, s.axes[i], shape[i].size});
    }
  }
  for (const NamedDim &d : preferred_)
    if (std::string axis = mesh_.ruleFor(d.name); !axis.empty() && d.size % mesh_.size(axis) == 0)
      candidates.push_back({kKept, d.name, axis, d.size});
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate &a, const Candidate &b) { return a.priority < b.priority; });
  std::set<std::string> usedAxes;
  for (const Candidate &c : candidates) {
    if (llvm::is_contained(whole_, c.dim) || chosen_.count(c.dim))
      continue;
    // A group some of whose axes are taken keeps the free ones outside them: row-major, the
    // block of its outer axes holds the blocks of the whole group, so nothing moves for them
    // (tokens split over (dp, ep) keep dp when the experts take ep).
    SmallVector<StringRef, 2> group = axesOfSplit(c.axis);
    size_t free = 0;
    while (free < group.size() && !usedAxes.count(group[free].str()))
      ++free;
    if (free == 0)
      continue;
    chosen_[c.dim] = llvm::join(ArrayRef(group).take_front(free), "_");
    for (StringRef a : ArrayRef(group).take_front(free))
      usedAxes.insert(a.str());
  }
  // A tied dim follows its leader, or the leader may not be split.
  for (const auto &[leader, follower, followerMayStayWhole] : ties_) {
    auto it = chosen_.find(leader);
    if (it == chosen_.end())
      continue;
    if (auto f = chosen_.find(follower); f != chosen_.end() && f->second == it->second)
      continue;
    int64_t size = 0;
    for (const auto &[shape, s] : operands_)
      if (int at = findDim(shape, follower); at >= 0)
        size = shape[at].size;
    if (size > 0 && size % mesh_.size(it->second) == 0 && !chosen_.count(follower)) {
      chosen_[follower] = it->second;
    } else if (followerMayStayWhole && !chosen_.count(follower)) {
      continue;
    } else {
      chosen_.erase(it);
      chosen_.erase(follower);
    }
  }
  rule.operands.clear();
  for (auto [operand, partial] : llvm::zip(operands_, keptPartial_)) {
    const NamedShape &shape = operand.first;
    Sharding need = Sharding::replicated(shape.size());
    for (size_t i = 0; i < shape.size(); ++i)
      need.axes[i] = axisOf(shape[i].name);
    need.partial = partial;
    rule.operands.push_back(need);
  }
}

std::string DimSolver::axisOf(StringRef dim) const {
  auto it = chosen_.find(dim.str());
  return it == chosen_.end() ? std::string() : it->second;
}

Sharding DimSolver::result(const NamedShape &shape, ArrayRef<std::string> summed) const {
  Sharding s = Sharding::replicated(shape.size());
  for (size_t i = 0; i < shape.size(); ++i)
    s.axes[i] = axisOf(shape[i].name);
  for (const std::string &d : summed)
    if (std::string axis = axisOf(d); !axis.empty())
      s.addPartial(axis);
  return s;
}

std::optional<Sharding> tessel::graph::recordedSharding(Value v) {
  ShardingAttr attr;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (auto func = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()))
      attr = func.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(), kShardingAttr);
  } else if (auto all = v.getDefiningOp()->getAttrOfType<ArrayAttr>(kShardingAttr)) {
    unsigned i = cast<OpResult>(v).getResultNumber();
    if (i < all.size())
      attr = dyn_cast<ShardingAttr>(all[i]);
  }
  if (!attr)
    return std::nullopt;
  return getSharding(attr);
}

//===----------------------------------------------------------------------===//
// Default partition
//===----------------------------------------------------------------------===//

LogicalResult tessel::graph::partitionByCloning(Operation *op, Partitioner &p,
                                                ArrayRef<Value> operands, const ShardingRule &rule,
                                                SmallVectorImpl<Value> &results) {
  SmallVector<Type> types;
  for (auto [result, s] : llvm::zip(op->getResults(), rule.results))
    types.push_back(p.localType(result.getType(), s));
  OperationState state(op->getLoc(), op->getName(), operands, types, op->getAttrs());
  Operation *clone = p.builder().create(state);
  results.append(clone->result_begin(), clone->result_end());
  return success();
}
