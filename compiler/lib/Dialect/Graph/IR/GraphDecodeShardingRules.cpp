//===- GraphDecodeShardingRules.cpp - Sharding rules of the decoding ops ===//
//
// The ShardableOpInterface implementations of the ops the decoder derivation builds: caches
// split as the rules split their heads, running totals held whole, and the new tokens split
// only over data axes.
//
//===----------------------------------------------------------------------===//

#include "GraphShardingRules.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"

using namespace mlir;
using namespace tessel;
using namespace tessel::graph;
using namespace tessel::graph::rules;

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
LogicalResult PagedAttentionOp::inferSharding(const MeshLayout &mesh, ArrayRef<Sharding> operands,
                                              ShardingRule &rule) {
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
