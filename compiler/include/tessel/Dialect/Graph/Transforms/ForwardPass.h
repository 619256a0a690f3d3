//===- ForwardPass.h - The forward pass of a training step -----*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_FORWARDPASS_H
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_FORWARDPASS_H

#include "mlir/IR/Block.h"

#include "llvm/ADT/DenseSet.h"

namespace tessel {

/// The ops of `body` that what it returns depends on: in @forward_backward, which returns the
/// loss, its forward pass; every other op is the backward pass (gradients, their reductions
/// and accumulation). The pipeline split places ops by it and recomputation clones across it.
llvm::DenseSet<mlir::Operation *> forwardPass(mlir::Block &body);

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_FORWARDPASS_H
