//===- Logits.h - Functions that return the model's logits ------*- C++ -*-===//
//
// Generation runs the forward graph without its loss: @sample (-tessel-derive-sampler) and
// the decode programs (-tessel-derive-decoder) start from the same clone of @forward.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_LOGITS_H
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_LOGITS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace tessel {

/// Clones `forward` after it as function `name`, returning the logits its final cross-entropy
/// read instead of the loss (and the terms `add_loss` added to it); what no longer reaches the
/// logits goes, arguments included (the targets). Null, after a diagnostic, when `forward`
/// does not return a cross-entropy.
mlir::func::FuncOp cloneLogitsFunction(mlir::OpBuilder &b, mlir::func::FuncOp forward,
                                       llvm::StringRef name);

/// `type` with its dim `name` resized to `size`; other types unchanged.
mlir::Type resizedDim(mlir::Type type, llvm::StringRef name, int64_t size);

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_LOGITS_H
