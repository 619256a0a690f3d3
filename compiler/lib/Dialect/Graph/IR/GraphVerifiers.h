//===- GraphVerifiers.h - What the graph ops' verifiers share ---*- C++ -*-===//
//
// Private to the graph dialect (lib/Dialect/Graph/IR): the checks the verifiers of GraphOps.cpp, GraphGradientOps.cpp
// and GraphDecodeOps.cpp have in common. Each reports on the op it is given and fails; none
// asserts.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_IR_GRAPHVERIFIERS_H
#define TESSEL_DIALECT_GRAPH_IR_GRAPHVERIFIERS_H

#include "tessel/Dialect/Graph/IR/GraphOps.h"

#include <optional>
#include <string>
#include <vector>

namespace tessel::graph::verifier {

/// Named shapes of an op's operands and result.
struct Shapes {
  llvm::SmallVector<NamedShape> operands;
  NamedShape result;
};
/// The shapes of every operand and of result 0, or a diagnostic on the op: each a ranked,
/// static tensor with one #graph.dims name per dim.
mlir::FailureOr<Shapes> namedShapes(mlir::Operation *op);

/// Compares a shape rule's result with the declared result shape.
mlir::LogicalResult expectShape(mlir::Operation *op, const ShapeResult &rule,
                                const NamedShape &declared);
/// Element types must agree across `values` and result 0.
mlir::LogicalResult sameElementType(mlir::Operation *op, mlir::ValueRange values);
/// Every value in `values` must have exactly the type of `like` (`what` names them).
mlir::LogicalResult sameTypes(mlir::Operation *op, mlir::Type like, mlir::ValueRange values,
                              llvm::StringRef what);
mlir::LogicalResult expectScalar(mlir::Operation *op, mlir::Type type, llvm::StringRef what);
/// Gradient ops compute on named tensors like the ops they differentiate: every operand and
/// result has a #graph.dims encoding.
mlir::LogicalResult expectNamed(mlir::Operation *op);
/// An elementwise function's exponent (graph.unary, graph.unary_grad): pow takes one and no
/// other function does.
mlir::LogicalResult verifyExponent(mlir::Operation *op, UnaryFn fn,
                                   std::optional<llvm::APFloat> exponent);

/// An attention's log-sum-exp: f32, over the query's dims without its last (`head`).
mlir::LogicalResult verifyLse(mlir::Operation *op, mlir::Value query, mlir::Value lse);
/// rope's and rope_at's frequencies: a positive base, and Llama 3.1's scaling if given.
mlir::LogicalResult verifyRotation(mlir::Operation *op, llvm::APFloat theta,
                                   std::optional<llvm::ArrayRef<double>> scaling);

} // namespace tessel::graph::verifier

#endif // TESSEL_DIALECT_GRAPH_IR_GRAPHVERIFIERS_H
