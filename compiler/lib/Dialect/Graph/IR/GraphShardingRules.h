//===- GraphShardingRules.h - What the graph ops' sharding rules share -*- C++ -*-===//
//
// Private to the graph dialect's IR library: the pieces the ShardableOpInterface
// implementations of GraphShardingRules.cpp, GraphTrainShardingRules.cpp and
// GraphDecodeShardingRules.cpp build their rules from.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_IR_GRAPHSHARDINGRULES_H
#define TESSEL_DIALECT_GRAPH_IR_GRAPHSHARDINGRULES_H

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include <string>
#include <vector>

namespace tessel::graph::rules {

NamedShape shapeOf(mlir::Value v);
NamedShape shapeOf(mlir::Type t);
std::vector<std::string> namesOf(const NamedShape &s);

/// The common rule: every operand solved together, `whole` dims unsplit, every result
/// partial over the axes of the `summed` dims.
mlir::LogicalResult solveAll(mlir::Operation *op, const MeshLayout &mesh,
                             llvm::ArrayRef<Sharding> operands, ShardingRule &rule,
                             llvm::ArrayRef<std::string> whole = {},
                             llvm::ArrayRef<std::string> summed = {},
                             llvm::function_ref<void(DimSolver &)> configure = {});

/// Elementwise ops linear in all operands together (add, sub) pass partial sums through
/// when every operand is partial over the same axes.
mlir::LogicalResult linearElementwise(mlir::Operation *op, const MeshLayout &mesh,
                                      llvm::ArrayRef<Sharding> operands, ShardingRule &rule);

/// Elementwise ops linear in each operand alone (mul; div and unary_grad in one operand): a
/// partial sum in exactly one of the `linear` operands passes through, x * (a + b) being
/// x * a + x * b, when the others are whole sums and no dim is split over the partial axes.
/// Gradients stay partial through the backward pass (linear in the incoming gradient) until
/// an op needs them reduced or their accumulation takes them as they are.
mlir::LogicalResult linearInOne(mlir::Operation *op, const MeshLayout &mesh,
                                llvm::ArrayRef<Sharding> operands, ShardingRule &rule,
                                llvm::ArrayRef<unsigned> linear);

/// Every operand exactly as it is (the per-rank ops the partition pass creates).
void asTheyAre(llvm::ArrayRef<Sharding> operands, ShardingRule &rule);

/// A rank's value that should be the global one replicated: partial sums are reduced.
Sharding replicatedScalar(const Sharding &s);

/// A scalar tensor of `v`'s element type.
mlir::RankedTensorType scalarLike(mlir::Value v);

/// The number of elements of the dims of `shape` named in `dims` (global sizes).
int64_t countOf(const NamedShape &shape, llvm::ArrayRef<std::string> dims);

/// Whether any dim of `s` named in `dims` is split.
bool anySplit(const NamedShape &shape, const Sharding &s, llvm::ArrayRef<std::string> dims);

/// Sets or replaces one attribute on the op `results` came from.
void setAttrOn(llvm::ArrayRef<mlir::Value> results, llvm::StringRef name, mlir::Attribute value);

} // namespace tessel::graph::rules

#endif // TESSEL_DIALECT_GRAPH_IR_GRAPHSHARDINGRULES_H
