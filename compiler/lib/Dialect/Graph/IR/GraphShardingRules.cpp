//===- GraphShardingRules.cpp - The forward ops' sharding rules -----------===//
//
// The ShardableOpInterface implementations. Most ops state only which of their dims must stay
// whole and which they sum over; the shared DimSolver does the rest. Ops whose per-rank form
// differs from the global one (a lookup into a split table, a loss over a split vocabulary,
// a mean over a split dim, an optimizer step on a slice) also override `partition`. This file
// holds what the rules share (GraphShardingRules.h) and the rules of the elementwise ops,
// contractions and ops along one dim; GraphTrainShardingRules.cpp those of embeddings, losses,
// training state, the optimizer and the per-rank pieces; GraphDecodeShardingRules.cpp the
// decoding ops'.
//
//===----------------------------------------------------------------------===//

#include "GraphShardingRules.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include "common/layout/HeadTail.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <set>
#include <type_traits>

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::graph::rules;

//===----------------------------------------------------------------------===//
// What the rules share (GraphShardingRules.h)
//===----------------------------------------------------------------------===//

NamedShape rules::shapeOf(Value v) { return *getNamedShape(v.getType()); }
NamedShape rules::shapeOf(Type t) { return *getNamedShape(t); }

std::vector<std::string> rules::namesOf(const NamedShape &s) {
  std::vector<std::string> out;
  for (const NamedDim &d : s)
    out.push_back(d.name);
  return out;
}

LogicalResult rules::solveAll(Operation *op, const MeshLayout &mesh, ArrayRef<Sharding> operands,
                              ShardingRule &rule, ArrayRef<std::string> whole,
                              ArrayRef<std::string> summed,
                              function_ref<void(DimSolver &)> configure) {
  DimSolver solver(mesh);
  for (auto [v, s] : llvm::zip(op->getOperands(), operands)) {
    if (isa_and_nonnull<ParamOp>(v.getDefiningOp()))
      solver.addParameter(shapeOf(v), s);
    else
      solver.addOperand(shapeOf(v), s);
  }
  solver.sumOver(summed);
  for (const std::string &w : whole)
    solver.keepWhole(w);
  if (configure)
    configure(solver);
  solver.solve(rule);
  for (Value r : op->getResults())
    rule.results.push_back(solver.result(shapeOf(r), summed));
  return success();
}

LogicalResult rules::linearElementwise(Operation *op, const MeshLayout &mesh,
                                       ArrayRef<Sharding> operands, ShardingRule &rule) {
  bool samePartial = operands[0].isPartial();
  for (const Sharding &s : operands)
    samePartial &= s.partial == operands[0].partial;
  if (!samePartial)
    return solveAll(op, mesh, operands, rule);
  DimSolver solver(mesh);
  for (auto [v, s] : llvm::zip(op->getOperands(), operands))
    solver.addOperand(shapeOf(v), s, /*keepPartial=*/true);
  solver.solve(rule);
  Sharding r = solver.result(shapeOf(op->getResult(0)));
  r.partial = operands[0].partial;
  rule.results.push_back(r);
  return success();
}

LogicalResult rules::linearInOne(Operation *op, const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                 ShardingRule &rule, ArrayRef<unsigned> linear) {
  int partialAt = -1;
  for (auto [i, s] : llvm::enumerate(operands)) {
    if (!s.isPartial())
      continue;
    if (partialAt >= 0 || !llvm::is_contained(linear, i))
      return solveAll(op, mesh, operands, rule);
    partialAt = static_cast<int>(i);
  }
  if (partialAt < 0)
    return solveAll(op, mesh, operands, rule);
  DimSolver solver(mesh);
  for (auto [i, v, s] : llvm::enumerate(op->getOperands(), operands))
    solver.addOperand(shapeOf(v), s, /*keepPartial=*/static_cast<int>(i) == partialAt);
  ShardingRule tried;
  solver.solve(tried);
  const auto &partial = operands[partialAt].partial;
  for (const Sharding &s : tried.operands)
    for (const std::string &axis : partial)
      if (s.splitsOver(axis))
        return solveAll(op, mesh, operands, rule);
  rule.operands = tried.operands;
  Sharding r = solver.result(shapeOf(op->getResult(0)));
  r.partial = partial;
  rule.results.push_back(r);
  return success();
}

void rules::asTheyAre(ArrayRef<Sharding> operands, ShardingRule &rule) {
  rule.operands.assign(operands.begin(), operands.end());
}

Sharding rules::replicatedScalar(const Sharding &s) { return Sharding::replicated(s.axes.size()); }

RankedTensorType rules::scalarLike(Value v) {
  return getNamedTensorType(v.getContext(), {},
                            cast<RankedTensorType>(v.getType()).getElementType());
}

int64_t rules::countOf(const NamedShape &shape, ArrayRef<std::string> dims) {
  int64_t n = 1;
  for (const std::string &d : dims)
    if (int at = findDim(shape, d); at >= 0)
      n *= shape[at].size;
  return n;
}

bool rules::anySplit(const NamedShape &shape, const Sharding &s, ArrayRef<std::string> dims) {
  for (const std::string &d : dims)
    if (int at = findDim(shape, d); at >= 0 && !s.axes[at].empty())
      return true;
  return false;
}

void rules::setAttrOn(ArrayRef<Value> results, StringRef name, Attribute value) {
  results.front().getDefiningOp()->setAttr(name, value);
}

//===----------------------------------------------------------------------===//
// Sources and elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding>,
                                     ShardingRule &rule) {
  rule.results.push_back(mesh.stateSharding(shapeOf(getType()), StateRole::Param));
  return success();
}

LogicalResult ConstantOp::inferSharding(const MeshLayout &, ArrayRef<Sharding>,
                                        ShardingRule &rule) {
  rule.results.push_back(Sharding::replicated(shapeOf(getType()).size()));
  return success();
}

#define LINEAR_RULE(OP)                                                                            \
  LogicalResult OP::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,             \
                                  ShardingRule &rule) {                                            \
    return linearElementwise(*this, mesh, operands, rule);                                         \
  }
LINEAR_RULE(AddOp)
LINEAR_RULE(SubOp)
#undef LINEAR_RULE

#define ELEMENTWISE_RULE(OP)                                                                       \
  LogicalResult OP::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,             \
                                  ShardingRule &rule) {                                            \
    return solveAll(*this, mesh, operands, rule);                                                  \
  }
LogicalResult MulOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                   ShardingRule &rule) {
  return linearInOne(*this, mesh, operands, rule, {0, 1});
}

LogicalResult DivOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                   ShardingRule &rule) {
  return linearInOne(*this, mesh, operands, rule, {0});
}

// dx = dy * f'(x): linear in dy, the third operand.
LogicalResult UnaryGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                         ShardingRule &rule) {
  return linearInOne(*this, mesh, operands, rule, {2});
}

ELEMENTWISE_RULE(UnaryOp)
ELEMENTWISE_RULE(LtOp)
ELEMENTWISE_RULE(LeOp)
ELEMENTWISE_RULE(GtOp)
ELEMENTWISE_RULE(GeOp)
ELEMENTWISE_RULE(EqOp)
ELEMENTWISE_RULE(NeOp)
ELEMENTWISE_RULE(WhereOp)
ELEMENTWISE_RULE(BroadcastOp)
ELEMENTWISE_RULE(PermuteOp)
#undef ELEMENTWISE_RULE

// Every rank computes all the positions; an op that needs them split slices its part.
LogicalResult PositionsOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                         ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, namesOf(shapeOf(getType())));
}

// A renamed dim is held whole on both sides of the rename: the rules that split `seq` say
// nothing of `seq_k`, and keys are read along the whole sequence. A rename moves no data, so
// a partial sum passes through it (a gradient stays partial until an op needs it reduced)
// when no dim is split over the partial axes.
LogicalResult RenameOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                      ShardingRule &rule) {
  std::vector<std::string> whole;
  for (auto [from, to] : llvm::zip(shapeOf(getInput()), shapeOf(getType())))
    if (from.name != to.name) {
      whole.push_back(from.name);
      whole.push_back(to.name);
    }
  if (!operands[0].isPartial())
    return solveAll(*this, mesh, operands, rule, whole);
  DimSolver solver(mesh);
  solver.addOperand(shapeOf(getInput()), operands[0], /*keepPartial=*/true);
  for (const std::string &w : whole)
    solver.keepWhole(w);
  ShardingRule tried;
  solver.solve(tried);
  for (const std::string &axis : operands[0].partial)
    if (tried.operands[0].splitsOver(axis))
      return solveAll(*this, mesh, operands, rule, whole);
  rule.operands = tried.operands;
  Sharding r = solver.result(shapeOf(getType()));
  r.partial = operands[0].partial;
  rule.results.push_back(r);
  return success();
}

// Any split: the runtime draws each element's mask from its index in the whole tensor, so a
// rank's block drops what one rank would drop there.
LogicalResult DropoutOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                       ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule);
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

LogicalResult ContractOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                        ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {}, stringsOf(getSum()));
}

#define REDUCE_RULE(OP)                                                                            \
  LogicalResult OP::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,             \
                                  ShardingRule &rule) {                                            \
    return solveAll(*this, mesh, operands, rule, {}, stringsOf(getDims()));                        \
  }
REDUCE_RULE(SumOp)
REDUCE_RULE(MeanOp)
#undef REDUCE_RULE

LogicalResult SumOp::partition(Partitioner &p, ArrayRef<Value> operands, const ShardingRule &rule,
                               SmallVectorImpl<Value> &results) {
  return partitionByCloning(*this, p, operands, rule, results);
}

// A rank's mean over its part of a split dim divides by its part's size; the sum of the
// ranks' results is the mean only when each divides by the whole size instead.
LogicalResult MeanOp::partition(Partitioner &p, ArrayRef<Value> operands, const ShardingRule &rule,
                                SmallVectorImpl<Value> &results) {
  if (failed(partitionByCloning(*this, p, operands, rule, results)))
    return failure();
  NamedShape global = shapeOf(getInput());
  std::vector<std::string> dims = stringsOf(getDims());
  if (!anySplit(global, rule.operands[0], dims))
    return success();
  NamedShape local = shapeOf(operands[0]);
  double factor = static_cast<double>(countOf(local, dims)) / countOf(global, dims);
  OpBuilder &b = p.builder();
  Value c = ConstantOp::create(b, getLoc(), scalarLike(results[0]), b.getF64FloatAttr(factor));
  results[0] = MulOp::create(b, getLoc(), results[0].getType(), results[0], c);
  return success();
}

//===----------------------------------------------------------------------===//
// Ops along one dim: softmax, norms, attention, rotary embedding, reshapes
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                       ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {getDim().str()});
}

LogicalResult TopKOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                    ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {getDim().str()});
}

LogicalResult SoftmaxGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                           ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {getDim().str()});
}

LogicalResult LayerNormOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                         ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, namesOf(shapeOf(getScale())));
}

LogicalResult RMSNormOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                       ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, namesOf(shapeOf(getScale())));
}

/// Norm gradients: the input gradient is laid out as the input; the scale and bias
/// gradients sum over the rows, so they are partial over the axes splitting rows.
static LogicalResult normGradRule(Operation *op, const MeshLayout &mesh,
                                  ArrayRef<Sharding> operands, ShardingRule &rule) {
  NamedShape x = shapeOf(op->getOperand(0)), g = shapeOf(op->getOperand(1));
  std::vector<std::string> rows;
  for (const NamedDim &d : x)
    if (findDim(g, d.name) < 0)
      rows.push_back(d.name);
  if (failed(solveAll(op, mesh, operands, rule, namesOf(g))))
    return failure();
  for (size_t i = 1; i < rule.results.size(); ++i)
    for (const std::string &r : rows)
      if (int at = findDim(x, r); at >= 0 && !rule.operands[0].axes[at].empty())
        rule.results[i].addPartial(rule.operands[0].axes[at]);
  return success();
}

LogicalResult LayerNormGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                             ShardingRule &rule) {
  return normGradRule(*this, mesh, operands, rule);
}

LogicalResult RMSNormGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                           ShardingRule &rule) {
  return normGradRule(*this, mesh, operands, rule);
}

/// The axis splitting attention's query heads but not its kv heads under `rule`, or "".
static std::string headsOverAxis(Operation *op, const ShardingRule &rule) {
  NamedShape q = shapeOf(op->getOperand(0)), k = shapeOf(op->getOperand(1));
  size_t r = q.size();
  if (q[r - 2].name == k[r - 2].name || !rule.operands[1].axes[r - 2].empty())
    return "";
  return rule.operands[0].axes[r - 2];
}

/// Attention reads whole sequences and whole heads; it splits over heads (and batch). Key
/// and value heads are tied to query heads: each rank keeps the key/value heads its query
/// heads read (grouped-query attention keeps groups whole this way). When the axis
/// splitting the query heads does not divide the kv heads (multi-query attention, or more
/// tp ranks than kv heads), every rank holds every kv head and reads those its block of query
/// heads needs (`heads_over`); the key and value gradients are then partial sums over that
/// axis, each rank adding into the kv heads its query heads read.
///
/// Under context parallelism (the spec splits the queries' sequence over cp) the queries,
/// the output and their gradients keep this rank's head-tail block of the sequence
/// (`seq_over`). With `context = allgather` the keys and values are gathered whole: each rank
/// attends its queries to every key, and the key and value gradients are its addends,
/// reduce-scattered back over cp. With `context = ring` the keys and values keep their blocks
/// too, and so do their gradients: the lowering passes the blocks around the cp ring.
static LogicalResult attentionRule(Operation *op, const MeshLayout &mesh,
                                   ArrayRef<Sharding> operands, ShardingRule &rule, bool grad) {
  NamedShape q = shapeOf(op->getOperand(0)), k = shapeOf(op->getOperand(1));
  size_t r = q.size();
  std::vector<std::string> whole = {q[r - 3].name, k[r - 3].name, q[r - 1].name, k[r - 1].name};
  std::string heads = q[r - 2].name, kvHeads = k[r - 2].name;
  if (failed(solveAll(op, mesh, operands, rule, whole, {}, [&](DimSolver &s) {
        if (heads != kvHeads)
          s.tie(heads, kvHeads, /*followerMayStayWhole=*/true);
      })))
    return failure();
  std::string axis = headsOverAxis(op, rule);
  if (grad && !axis.empty())
    for (size_t i = 1; i < rule.results.size(); ++i)
      rule.results[i].addPartial(axis);
  std::string seqAxis = std::string(headtail::kAxis);
  if (mesh.size(seqAxis) > 1 && mesh.ruleFor(q[r - 3].name) == seqAxis &&
      q[r - 3].size % (2 * mesh.size(seqAxis)) == 0) {
    rule.operands[0].axes[r - 3] = seqAxis;
    rule.results[0].axes[r - 3] = seqAxis;
    if (grad)
      rule.operands[3].axes[r - 3] = seqAxis;
    for (size_t i = 1; i < rule.results.size(); ++i) {
      if (!mesh.contextRing())
        rule.results[i].addPartial(seqAxis);
      else
        rule.results[i].axes[r - 3] = seqAxis;
    }
    if (mesh.contextRing())
      rule.operands[1].axes[r - 3] = rule.operands[2].axes[r - 3] = seqAxis;
  }
  return success();
}

/// The axis splitting attention's queries' sequence head-tail under `rule`, or "".
static std::string seqOverAxis(Operation *op, const ShardingRule &rule) {
  size_t r = shapeOf(op->getOperand(0)).size();
  const std::string &axis = rule.operands[0].axes[r - 3];
  return axis == headtail::kAxis ? axis : "";
}

/// The per-rank attention names the axis its query heads are split over when the kv heads
/// are whole.
static LogicalResult partitionAttention(Operation *op, Partitioner &p, ArrayRef<Value> operands,
                                        const ShardingRule &rule, SmallVectorImpl<Value> &results) {
  if (failed(partitionByCloning(op, p, operands, rule, results)))
    return failure();
  if (std::string axis = headsOverAxis(op, rule); !axis.empty())
    setAttrOn(results, "heads_over", p.builder().getStringAttr(axis));
  if (std::string axis = seqOverAxis(op, rule); !axis.empty())
    setAttrOn(results, "seq_over", p.builder().getStringAttr(axis));
  return success();
}

LogicalResult AttentionOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                         ShardingRule &rule) {
  return attentionRule(*this, mesh, operands, rule, /*grad=*/false);
}

LogicalResult AttentionOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                     const ShardingRule &rule, SmallVectorImpl<Value> &results) {
  return partitionAttention(*this, p, operands, rule, results);
}

LogicalResult AttentionGradOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                             ShardingRule &rule) {
  return attentionRule(*this, mesh, operands, rule, /*grad=*/true);
}

LogicalResult AttentionGradOp::partition(Partitioner &p, ArrayRef<Value> operands,
                                         const ShardingRule &rule,
                                         SmallVectorImpl<Value> &results) {
  return partitionAttention(*this, p, operands, rule, results);
}

// Rotation angles depend on the position in the whole sequence: the sequence stays whole,
// except under context parallelism, where each rank turns its head-tail block by the
// positions it holds (`seq_over`).
LogicalResult RopeOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                    ShardingRule &rule) {
  NamedShape x = shapeOf(getInput());
  size_t r = x.size();
  if (failed(solveAll(*this, mesh, operands, rule, {x[r - 3].name, x[r - 1].name})))
    return failure();
  std::string cp(headtail::kAxis);
  if (mesh.size(cp) > 1 && mesh.ruleFor(x[r - 3].name) == cp &&
      x[r - 3].size % (2 * mesh.size(cp)) == 0)
    rule.operands[0].axes[r - 3] = rule.results[0].axes[r - 3] = cp;
  return success();
}

LogicalResult RopeOp::partition(Partitioner &p, ArrayRef<Value> operands, const ShardingRule &rule,
                                SmallVectorImpl<Value> &results) {
  if (failed(partitionByCloning(*this, p, operands, rule, results)))
    return failure();
  size_t r = shapeOf(getInput()).size();
  if (const std::string &axis = rule.operands[0].axes[r - 3]; !axis.empty())
    setAttrOn(results, "seq_over", p.builder().getStringAttr(axis));
  return success();
}

LogicalResult SplitOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                     ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {getDim().str()});
}

LogicalResult MergeOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                     ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, stringsOf(getDims()));
}
