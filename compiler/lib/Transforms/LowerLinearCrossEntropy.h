//===- LowerLinearCrossEntropy.h - The fused output head in the plan ------===//
#ifndef TESSEL_TRANSFORMS_LOWERLINEARCROSSENTROPY_H
#define TESSEL_TRANSFORMS_LOWERLINEARCROSSENTROPY_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LogicalResult.h"

namespace tessel {

/// Emits, at `b`'s insertion point, the kernel calls of a `graph.linear_cross_entropy` or
/// `graph.linear_cross_entropy_grad` (`op`): per chunk of rows, a GEMM of the chunk's logits
/// into one scratch buffer, the loss (and the logits' gradient, in place), then the chunk's
/// rows of the input gradient and the weight gradient's sum. `operands` and `results` are the
/// buffers of the op's operands and results.
mlir::LogicalResult lowerLinearCrossEntropy(mlir::OpBuilder &b, mlir::Operation *op,
                                            mlir::ValueRange operands, mlir::ValueRange results);

} // namespace tessel

#endif // TESSEL_TRANSFORMS_LOWERLINEARCROSSENTROPY_H
