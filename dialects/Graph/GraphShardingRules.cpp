//===- GraphShardingRules.cpp - Each graph op's sharding rule -------------===//
//
// The ShardableOpInterface implementations. Most ops state only which of their dims must stay
// whole and which they sum over; the shared DimSolver does the rest. Ops whose per-rank form
// differs from the global one (a lookup into a split table, a loss over a split vocabulary,
// a mean over a split dim, an optimizer step on a slice) also override `partition`.
//
//===----------------------------------------------------------------------===//

#include "Graph/GraphOps.h"

#include "common/HeadTail.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <set>
#include <type_traits>

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;

namespace {

NamedShape shapeOf(Value v) { return *getNamedShape(v.getType()); }
NamedShape shapeOf(Type t) { return *getNamedShape(t); }

std::vector<std::string> namesOf(const NamedShape &s) {
  std::vector<std::string> out;
  for (const NamedDim &d : s)
    out.push_back(d.name);
  return out;
}

std::vector<std::string> strings(ArrayAttr a) {
  std::vector<std::string> out;
  for (Attribute s : a)
    out.push_back(cast<StringAttr>(s).str());
  return out;
}

/// The common rule: every operand solved together, `whole` dims unsplit, every result
/// partial over the axes of the `summed` dims.
LogicalResult solveAll(Operation *op, const MeshLayout &mesh, ArrayRef<Sharding> operands,
                       ShardingRule &rule, ArrayRef<std::string> whole = {},
                       ArrayRef<std::string> summed = {},
                       function_ref<void(DimSolver &)> configure = {}) {
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

/// Elementwise ops linear in all operands together (add, sub) pass partial sums through
/// when every operand is partial over the same axes.
LogicalResult linearElementwise(Operation *op, const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                ShardingRule &rule) {
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

/// Elementwise ops linear in each operand alone (mul; div and unary_grad in one operand): a
/// partial sum in exactly one of the `linear` operands passes through, x * (a + b) being
/// x * a + x * b, when the others are whole sums and no dim is split over the partial axes.
/// Gradients stay partial through the backward pass (linear in the incoming gradient) until
/// an op needs them reduced or their accumulation takes them as they are.
LogicalResult linearInOne(Operation *op, const MeshLayout &mesh, ArrayRef<Sharding> operands,
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

/// Every operand exactly as it is (the per-rank ops the partition pass creates).
void asTheyAre(ArrayRef<Sharding> operands, ShardingRule &rule) {
  rule.operands.assign(operands.begin(), operands.end());
}

/// A rank's value that should be the global one replicated: partial sums are reduced.
Sharding replicatedScalar(const Sharding &s) { return Sharding::replicated(s.axes.size()); }

RankedTensorType scalarLike(Value v) {
  return getNamedTensorType(v.getContext(), {},
                            cast<RankedTensorType>(v.getType()).getElementType());
}

/// The number of elements of the dims of `shape` named in `dims` (global sizes).
int64_t countOf(const NamedShape &shape, ArrayRef<std::string> dims) {
  int64_t n = 1;
  for (const std::string &d : dims)
    if (int at = findDim(shape, d); at >= 0)
      n *= shape[at].size;
  return n;
}

/// Whether any dim of `s` named in `dims` is split.
bool anySplit(const NamedShape &shape, const Sharding &s, ArrayRef<std::string> dims) {
  for (const std::string &d : dims)
    if (int at = findDim(shape, d); at >= 0 && !s.axes[at].empty())
      return true;
  return false;
}

/// Sets or replaces one attribute on the op `results` came from.
void setAttrOn(ArrayRef<Value> results, StringRef name, Attribute value) {
  results.front().getDefiningOp()->setAttr(name, value);
}

} // namespace

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

ELEMENTWISE_RULE(NegOp)
ELEMENTWISE_RULE(ExpOp)
ELEMENTWISE_RULE(LogOp)
ELEMENTWISE_RULE(SqrtOp)
ELEMENTWISE_RULE(RsqrtOp)
ELEMENTWISE_RULE(TanhOp)
ELEMENTWISE_RULE(GeluOp)
ELEMENTWISE_RULE(SiluOp)
ELEMENTWISE_RULE(ReluOp)
ELEMENTWISE_RULE(SigmoidOp)
ELEMENTWISE_RULE(SquareOp)
ELEMENTWISE_RULE(GeluErfOp)
ELEMENTWISE_RULE(PowOp)
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
  return solveAll(*this, mesh, operands, rule, {}, strings(getSum()));
}

#define REDUCE_RULE(OP)                                                                            \
  LogicalResult OP::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,             \
                                  ShardingRule &rule) {                                            \
    return solveAll(*this, mesh, operands, rule, {}, strings(getDims()));                          \
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
  std::vector<std::string> dims = strings(getDims());
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
  return solveAll(*this, mesh, operands, rule, strings(getDims()));
}

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
  results.push_back(SqrtOp::create(b, loc, scalar, total));
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

//===----------------------------------------------------------------------===//
// Decoding
//===----------------------------------------------------------------------===//

// A cache is split as the rules split its heads (tensor parallelism), never over a data or
// context axis: every rank of those holds a whole pool for the sequences it decodes.
LogicalResult KvCacheOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding>,
                                       ShardingRule &rule) {
  NamedShape shape = shapeOf(getType());
  Sharding s = mesh.byRules(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (i != 2)
      s.axes[i].clear();
  rule.results.push_back(s);
  return success();
}

// As attention, with the key heads tied to the query heads so that both stay whole when an
// axis splits one but not the other: the caches never move, so the rule must ask for them
// as they are held (KvCacheOp's rule), which splits their heads only where that axis
// divides them.
LogicalResult PagedAttentionOp::inferSharding(const MeshLayout &mesh,
                                              ArrayRef<Sharding> operands, ShardingRule &rule) {
  NamedShape q = shapeOf(getQuery()), k = shapeOf(getKey()), table = shapeOf(getBlockTable());
  std::vector<std::string> whole = {q[1].name, q[3].name, "cache_blocks", "block_slot",
                                    table[1].name};
  std::string heads = q[2].name, kvHeads = k[2].name;
  DimSolver solver(mesh);
  for (auto [i, v] : llvm::enumerate(getOperation()->getOperands())) {
    if (i >= 5)
      solver.addParameter(shapeOf(v), operands[i]);
    else
      solver.addOperand(shapeOf(v), operands[i]);
  }
  for (const std::string &w : whole)
    solver.keepWhole(w);
  if (heads != kvHeads)
    solver.tie(heads, kvHeads);
  solver.solve(rule);
  rule.results.push_back(solver.result(shapeOf(getResult())));
  for (size_t i = 5; i < 7; ++i)
    if (!(rule.operands[i] == operands[i]))
      return emitOpError() << "would need its cache laid out as " << rule.operands[i].str()
                           << ", but it is held as " << operands[i].str();
  return success();
}

// Totals are never split: each rank of a data axis holds the rows of the sequences it
// decodes, and the sums are small.
LogicalResult RunningTotalsOp::inferSharding(const MeshLayout &, ArrayRef<Sharding>,
                                             ShardingRule &rule) {
  rule.results.push_back(Sharding::replicated(shapeOf(getType()).size()));
  return success();
}

// Only the sequences may split (over data axes): the totals are held whole.
LogicalResult RunningSumOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                          ShardingRule &rule) {
  NamedShape x = shapeOf(getInput()), table = shapeOf(getBlockTable());
  DimSolver solver(mesh);
  for (auto [i, v] : llvm::enumerate(getOperation()->getOperands())) {
    if (i == 3)
      solver.addParameter(shapeOf(v), operands[i]);
    else
      solver.addOperand(shapeOf(v), operands[i]);
  }
  for (size_t i = 1; i < x.size(); ++i)
    solver.keepWhole(x[i].name);
  solver.keepWhole(table[1].name);
  solver.keepWhole("cache_blocks");
  solver.solve(rule);
  rule.results.push_back(solver.result(x));
  if (!(rule.operands[3] == operands[3]))
    return emitOpError() << "would need its totals laid out as " << rule.operands[3].str()
                         << ", but they are held as " << operands[3].str();
  return success();
}

LogicalResult SliceOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                     ShardingRule &rule) {
  return solveAll(*this, mesh, operands, rule, {getDim().str()});
}

LogicalResult RopeAtOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                      ShardingRule &rule) {
  NamedShape x = shapeOf(getInput());
  return solveAll(*this, mesh, operands, rule, {x[1].name, x[3].name});
}
