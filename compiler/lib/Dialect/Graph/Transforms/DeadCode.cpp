//===- DeadCode.cpp - Removing ops nothing uses ---------------------------===//

#include "tessel/Dialect/Graph/Transforms/DeadCode.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

void tessel::eraseDeadPureOps(mlir::Block &block) {
  // Collected first: erasing while walking would invalidate the walk.
  llvm::SmallVector<mlir::Operation *> ops;
  for (mlir::Operation &op : block)
    ops.push_back(&op);
  for (mlir::Operation *op : llvm::reverse(ops))
    if (op->use_empty() && mlir::isPure(op) && !op->hasTrait<mlir::OpTrait::IsTerminator>())
      op->erase();
}
