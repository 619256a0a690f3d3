//===- GraphTrainShardingRules.cpp - Sharding rules of losses and training ===//
//
// The ShardableOpInterface implementations of embeddings and the cross-entropy (a lookup into a
// table split by rows, a loss over a split vocabulary), of the training state and the
// optimizer (a step on a parameter's slice), and of the per-rank pieces the partition pass
// creates, whose rules serve the sharding verifier.
//
//===----------------------------------------------------------------------===//

#include "GraphShardingRules.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::graph::rules;

//===----------------------------------------------------------------------===//
// Embedding and cross-entropy
//===----------------------------------------------------------------------===//

// A lookup into a table split by rows gives each rank the rows it holds and zeros for the
// rest: the result is a partial sum over the rows' axis.
LogicalResult EmbeddingOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                         ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {}, {shapeOf(getTable())[0].name});
}

LogicalResult EmbeddingOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                     const ShardingRule &rule, SmallVectorImpl<Value> &results) {
  if (failed(partitionByCloning(*this, p, operands, rule, results)))
    return failure();
  if (const std::string &axis = rule.operands[0].axes[0]; !axis.empty())
    setAttrOn(results, "row_axis", p.builder().getStringAttr(axis));
  return success();
}

LogicalResult EmbeddingGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                             ShardingRule &rule) {
  NamedDim rows = shapeOf(getType())[0];
  return solveAll(*this, mesh, operands, rule, {}, namesOf(shapeOf(getIds())),
                  [&](DimSolver &s) { s.prefer(rows.name, rows.size); });
}

LogicalResult EmbeddingGradOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                         const ShardingRule &rule,
                                         SmallVectorImpl<Value> &results) {
  if (failed(partitionByCloning(*this, p, operands, rule, results)))
    return failure();
  if (const std::string &axis = rule.results[0].axes[0]; !axis.empty())
    setAttrOn(results, "row_axis", p.builder().getStringAttr(axis));
  return success();
}

// The loss is a mean over positions: a rank holding part of the batch contributes its part
// of the sum divided by the whole count, so the loss is partial over the rows' axes. A split
// class dim is handled inside the per-rank form (vocabulary-parallel cross-entropy).
LogicalResult CrossEntropyOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                            ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {}, namesOf(shapeOf(getTargets())));
}

LogicalResult CrossEntropyGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                                ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule);
}

namespace {

/// The row statistics of vocabulary-parallel cross-entropy: global row maxima and softmax
/// denominators (and target logits), each finished by an all-reduce over the class axis.
struct RowStats {
  Value max, sums, picked;
};

RowStats rowStats(Partitioner &p, Location loc, Value logits, Value targets, Type rowsGlobal,
                  const Sharding &rows, StringRef dim, StringRef axis, bool withPicked) {
  // The gradient reads the loss's statistics of the same logits rather than reducing again.
  std::string key =
      "ce-row-stats:" + std::to_string(reinterpret_cast<uintptr_t>(logits.getAsOpaquePointer())) +
      ":" + std::to_string(reinterpret_cast<uintptr_t>(targets.getAsOpaquePointer()));
  auto &memo = p.memo();
  if (!withPicked && memo.count(key + ":max"))
    return {memo[key + ":max"], memo[key + ":sums"], Value()};
  OpBuilder &b = p.builder();
  Type rowsLocal = targets.getType();
  auto f32Rows = RankedTensorType::get(cast<RankedTensorType>(rowsLocal).getShape(),
                                       cast<RankedTensorType>(logits.getType()).getElementType(),
                                       cast<RankedTensorType>(rowsLocal).getEncoding());
  auto globalRows = RankedTensorType::get(cast<RankedTensorType>(rowsGlobal).getShape(),
                                          f32Rows.getElementType(), f32Rows.getEncoding());
  Sharding partialRows = rows;
  partialRows.addPartial(axis);
  Value localMax = CEMaxOp::create(b, loc, f32Rows, logits, dim, axis);
  int16_t gridAxis = static_cast<int16_t>(p.mesh().axisIndex(axis));
  Value max = shard::AllReduceOp::create(b, loc, f32Rows, kGridName, ArrayRef<int16_t>{gridAxis},
                                         localMax, shard::ReductionKind::Max);
  auto sums = CESumsOp::create(b, loc, f32Rows, f32Rows, logits, targets, max, dim, axis);
  RowStats stats{max, p.convert(sums.getSums(), globalRows, partialRows, rows), Value()};
  if (withPicked)
    stats.picked = p.convert(sums.getPicked(), globalRows, partialRows, rows);
  memo[key + ":max"] = stats.max;
  memo[key + ":sums"] = stats.sums;
  return stats;
}

std::string classAxis(Value logits, const Sharding &s, StringRef dim) {
  return s.axes[findDim(shapeOf(logits), dim.str())];
}

} // namespace

/// Cross-entropy and its gradient per rank: on whole classes the op itself, scaled by the
/// whole batch's positions when the rows are split; on split classes, from the row statistics.
template <typename OpTy>
static LogicalResult partitionCrossEntropy(OpTy op, Partitioner &p, ArrayRef<Value> operands,
                                           const ShardingRule &rule,
                                           SmallVectorImpl<Value> &results) {
  constexpr bool grad = std::is_same_v<OpTy, CrossEntropyGradOp>;
  NamedShape rowsShape = shapeOf(op.getTargets());
  double scale = 1.0 / static_cast<double>(countOf(rowsShape, namesOf(rowsShape)));
  OpBuilder &b = p.builder();
  std::string axis = classAxis(op.getLogits(), rule.operands[0], op.getDim());
  if (axis.empty()) {
    if (failed(partitionByCloning(op, p, operands, rule, results)))
      return failure();
    if (anySplit(rowsShape, rule.operands[1], namesOf(rowsShape)))
      setAttrOn(results, "scale", b.getF64FloatAttr(scale));
    return success();
  }
  RowStats s = rowStats(p, op.getLoc(), operands[0], operands[1], op.getTargets().getType(),
                        rule.operands[1], op.getDim(), axis, /*withPicked=*/!grad);
  if constexpr (grad)
    results.push_back(CEGradOp::create(b, op.getLoc(), operands[0].getType(), operands[0],
                                       operands[1], s.max, s.sums, operands[2], op.getDimAttr(),
                                       b.getStringAttr(axis), b.getF64FloatAttr(scale)));
  else
    results.push_back(CELossOp::create(b, op.getLoc(), p.localType(op.getType(), rule.results[0]),
                                       s.max, s.sums, s.picked, b.getF64FloatAttr(scale)));
  return success();
}

LogicalResult CrossEntropyOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                        const ShardingRule &rule, SmallVectorImpl<Value> &results) {
  return partitionCrossEntropy(*this, p, operands, rule, results);
}

LogicalResult CrossEntropyGradOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                            const ShardingRule &rule,
                                            SmallVectorImpl<Value> &results) {
  return partitionCrossEntropy(*this, p, operands, rule, results);
}

//===----------------------------------------------------------------------===//
// Training state and the optimizer
//===----------------------------------------------------------------------===//

LogicalResult AccumulateGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding>,
                                              ShardingRule &rule) {
  rule.operands.push_back(mesh.stateSharding(shapeOf(getGrad()), StateRole::Grad));
  return success();
}

LogicalResult GradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding>,
                                    ShardingRule &rule) {
  rule.results.push_back(mesh.stateSharding(shapeOf(getType()), StateRole::Grad));
  return success();
}

LogicalResult ZeroGradOp::inferSharding(const MeshLayout &, ArrayRef<Sharding>, ShardingRule &) {
  return success();
}

// Gradients still partial over dp (ZeRO-1 accumulates them unreduced) are reduce-scattered
// onto the slice this rank's optimizer state covers, so the update reuses them.
LogicalResult GlobalNormOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                          ShardingRule &rule) {
  for (auto [v, s] : llvm::zip(getInputs(), operands)) {
    NamedShape shape = shapeOf(v);
    Sharding need = mesh.reducedForm(shape, s);
    if (s.isPartialOver("dp"))
      if (int d = mesh.zeroDim(shape, need); d >= 0)
        need.axes[d] = "dp";
    rule.operands.push_back(need);
  }
  rule.results.push_back(Sharding::replicated(0));
  return success();
}

// Gradients split over the same axes share one sum of squares and one all-reduce; the
// groups' sums are added and the square root taken on every rank.
LogicalResult GlobalNormOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                      const ShardingRule &rule, SmallVectorImpl<Value> &results) {
  std::map<SmallVector<std::string, 4>, SmallVector<Value>> groups;
  for (auto [v, s] : llvm::zip(operands, rule.operands)) {
    SmallVector<std::string, 4> axes = s.splitAxes();
    llvm::sort(axes);
    groups[axes].push_back(v);
  }
  OpBuilder &b = p.builder();
  Location loc = getLoc();
  Type scalar = getType();
  Value total;
  for (auto &[axes, values] : groups) {
    Value sum = SumSquaresOp::create(b, loc, scalar, values);
    if (!axes.empty()) {
      Sharding partial = Sharding::replicated(0);
      for (const std::string &a : axes)
        partial.addPartial(a);
      sum = p.convert(sum, scalar, partial, Sharding::replicated(0));
    }
    total = total ? AddOp::create(b, loc, scalar, total, sum).getResult() : sum;
  }
  results.push_back(UnaryOp::create(b, loc, scalar, UnaryFn::Sqrt, total));
  return success();
}

LogicalResult GuardFiniteOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                           ShardingRule &rule) {
  // Every rank must decide alike: the value is whole on each.
  rule.operands.push_back(replicatedScalar(operands[0]));
  return success();
}

LogicalResult ClipCoefficientOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                               ShardingRule &rule) {
  rule.operands.push_back(replicatedScalar(operands[0]));
  rule.results.push_back(Sharding::replicated(0));
  return success();
}

LogicalResult LearningRateOp::inferSharding(const MeshLayout &, ArrayRef<Sharding>,
                                            ShardingRule &rule) {
  rule.results.push_back(Sharding::replicated(0));
  return success();
}

/// Optimizer steps: the gradient laid out as the optimizer state; a slice operand (after
/// partitioning) as it is.
static LogicalResult optimizerRule(Operation *op, Value grad, Value param, const MeshLayout &mesh,
                                   ArrayRef<Sharding> operands, ShardingRule &rule) {
  Sharding state = mesh.stateSharding(shapeOf(grad), StateRole::Optimizer);
  rule.operands = {param ? operands[0] : state, Sharding::replicated(0), Sharding::replicated(0)};
  if (param) {
    rule.operands.push_back(operands[3]);
    rule.results.push_back(operands[3]);
  }
  (void)op;
  return success();
}

/// Under ZeRO 1 and 2 the optimizer state covers a slice of a parameter every dp rank holds
/// whole: each rank updates its slice and the slices are all-gathered back.
static LogicalResult partitionOptimizerStep(Operation *op, StringRef name, Type globalType,
                                            Partitioner &p, ArrayRef<Value> operands,
                                            const ShardingRule &rule,
                                            SmallVectorImpl<Value> &results) {
  const MeshLayout &mesh = p.mesh();
  NamedShape shape = shapeOf(globalType);
  Sharding param = mesh.stateSharding(shape, StateRole::Param);
  Sharding slice = rule.operands[0];
  if (param == slice || op->getNumOperands() == 4)
    return partitionByCloning(op, p, operands, rule, results);
  OpBuilder &b = p.builder();
  Location loc = op->getLoc();
  Value whole = ParamOp::create(b, loc, p.localType(globalType, param), b.getStringAttr(name),
                                cast<InitAttr>(p.paramInit(name)));
  // Recorded here: the rule, read off the per-rank type, could not tell which dims are split.
  whole.getDefiningOp()->setAttr(kShardingAttr,
                                 b.getArrayAttr({getShardingAttr(b.getContext(), param)}));
  Value mine = p.convert(whole, globalType, param, slice);
  if (!mine)
    return failure();
  SmallVector<Value> ins(operands.begin(), operands.end());
  ins.push_back(mine);
  ShardingRule sliced = rule;
  sliced.operands.push_back(slice);
  sliced.results = {slice};
  OperationState state(loc, op->getName(), ins, {mine.getType()}, op->getAttrs());
  Operation *update = b.create(state);
  Value gathered = p.convert(update->getResult(0), globalType, slice, param);
  if (!gathered)
    return failure();
  AssignParamOp::create(b, loc, gathered, name);
  return success();
}

LogicalResult AdamWOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                     ShardingRule &rule) {
  return optimizerRule(*this, getGrad(), getParam(), mesh, operands, rule);
}

LogicalResult AdamWOp::partition(Partitioner &p, ArrayRef<Value> operands, const ShardingRule &rule,
                                 SmallVectorImpl<Value> &results) {
  return partitionOptimizerStep(*this, getName(), getGrad().getType(), p, operands, rule, results);
}

LogicalResult SGDOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                   ShardingRule &rule) {
  return optimizerRule(*this, getGrad(), getParam(), mesh, operands, rule);
}

LogicalResult SGDOp::partition(Partitioner &p, ArrayRef<Value> operands, const ShardingRule &rule,
                               SmallVectorImpl<Value> &results) {
  return partitionOptimizerStep(*this, getName(), getGrad().getType(), p, operands, rule, results);
}

//===----------------------------------------------------------------------===//
// Per-rank pieces (created by the partition pass; their rules serve the verifier)
//===----------------------------------------------------------------------===//

/// The rows of `logits` (its dims but the class dim), split as the logits are.
static Sharding rowsOf(Value logits, const Sharding &s, StringRef dim) {
  NamedShape l = shapeOf(logits);
  Sharding out;
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i].name != dim)
      out.axes.push_back(s.axes[i]);
  return out;
}

LogicalResult CEMaxOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                     ShardingRule &rule) {
  asTheyAre(operands, rule);
  Sharding rows = rowsOf(getLogits(), operands[0], getDim());
  rows.addPartial(getAxis());
  rule.results.push_back(rows);
  return success();
}

LogicalResult CESumsOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                      ShardingRule &rule) {
  asTheyAre(operands, rule);
  Sharding rows = rowsOf(getLogits(), operands[0], getDim());
  rule.operands[2] = rows; // the maxima must be reduced already
  rows.addPartial(getAxis());
  rule.results = {rows, rows};
  return success();
}

LogicalResult CELossOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                      ShardingRule &rule) {
  Sharding rows = operands[0];
  rows.partial.clear();
  rule.operands = {rows, rows, rows};
  Sharding loss = Sharding::replicated(0);
  for (const std::string &a : rows.splitAxes())
    loss.addPartial(a);
  rule.results.push_back(loss);
  return success();
}

LogicalResult CEGradOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                      ShardingRule &rule) {
  asTheyAre(operands, rule);
  Sharding rows = rowsOf(getLogits(), operands[0], getDim());
  rule.operands[2] = rows;
  rule.operands[3] = rows;
  rule.operands[4] = Sharding::replicated(0);
  rule.results.push_back(operands[0]);
  return success();
}

LogicalResult SumSquaresOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                          ShardingRule &rule) {
  Sharding sum = Sharding::replicated(0);
  for (const Sharding &s : operands) {
    Sharding whole = s;
    whole.partial.clear();
    rule.operands.push_back(whole);
    for (const std::string &a : s.splitAxes())
      sum.addPartial(a);
  }
  rule.results.push_back(sum);
  return success();
}

LogicalResult AssignParamOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding>,
                                           ShardingRule &rule) {
  rule.operands.push_back(mesh.stateSharding(shapeOf(getValue()), StateRole::Param));
  return success();
}

LogicalResult TiedGradSumOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                           ShardingRule &rule) {
  asTheyAre(operands, rule);
  rule.results.push_back(operands.front());
  return success();
}

LogicalResult PackOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                    ShardingRule &rule) {
  asTheyAre(operands, rule);
  Sharding bucket = Sharding::replicated(1);
  bucket.partial = operands.front().partial;
  rule.results.push_back(bucket);
  return success();
}

// A bucket's parts are laid out as the bucketing pass recorded on them.
LogicalResult UnpackOp::inferSharding(const MeshLayout &, ArrayRef<Sharding> operands,
                                      ShardingRule &rule) {
  asTheyAre(operands, rule);
  auto recorded = (*this)->getAttrOfType<ArrayAttr>(kShardingAttr);
  for (auto [i, r] : llvm::enumerate(getResults())) {
    auto s = recorded && i < recorded.size() ? dyn_cast<ShardingAttr>(recorded[i]) : ShardingAttr();
    rule.results.push_back(s ? getSharding(s) : Sharding::replicated(shapeOf(r).size()));
  }
  return success();
}
