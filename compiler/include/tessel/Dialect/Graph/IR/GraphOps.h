//===- GraphOps.h - Ops of the graph dialect --------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_IR_GRAPHOPS_H
#define TESSEL_DIALECT_GRAPH_IR_GRAPHOPS_H

#include "tessel/Dialect/Graph/IR/GraphDialect.h"
#include "tessel/Dialect/Graph/IR/GraphSharding.h"
#include "tessel/Shape/NamedShape.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace tessel::graph {

/// The named shape of a tensor type with a #graph.dims encoding, or nothing when the type
/// lacks one or its names do not fit its rank.
std::optional<NamedShape> getNamedShape(mlir::Type type);

/// The strings of an array of string attributes (the dims an op names: sum's, contract's).
std::vector<std::string> stringsOf(mlir::ArrayAttr array);

/// A tensor type over named dims.
mlir::RankedTensorType getNamedTensorType(mlir::MLIRContext *ctx, const NamedShape &shape,
                                          mlir::Type elementType);

/// How a `.model` file writes the op named `opName`, for diagnostics in the user's terms:
/// "graph.mul" is `*`, "graph.mean" is `mean`, "graph.attention_grad" the gradient of
/// `attention`, "graph.adamw" the optimizer's update. Ops of other dialects are described by
/// what they do ("shard.all_reduce" is an all_reduce between ranks).
std::string spelling(llvm::StringRef opName);
/// How a `.model` file writes `op`: as spelling(its name), and an elementwise function by
/// its own name (`gelu`, unary `-`).
std::string spelling(mlir::Operation *op);

/// The attribute form of a sharding, and back.
ShardingAttr getShardingAttr(mlir::MLIRContext *ctx, const Sharding &s);
Sharding getSharding(ShardingAttr attr);

} // namespace tessel::graph

#include "tessel/Dialect/Graph/IR/GraphInterfaces.h.inc"

#define GET_OP_CLASSES
#include "tessel/Dialect/Graph/IR/GraphOps.h.inc"

#endif // TESSEL_DIALECT_GRAPH_IR_GRAPHOPS_H
