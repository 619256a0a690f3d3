//===- DeadCode.h - Removing ops nothing uses -------------------*- C++ -*-===//
#ifndef TESSEL_DIALECT_GRAPH_TRANSFORMS_DEADCODE_H
#define TESSEL_DIALECT_GRAPH_TRANSFORMS_DEADCODE_H

#include "mlir/IR/Block.h"

namespace tessel {

/// Erases the side-effect-free ops of `block` whose results are unused, last first, so a
/// chain that only fed dead ops goes too.
void eraseDeadPureOps(mlir::Block &block);

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_TRANSFORMS_DEADCODE_H
