//===- ForwardPass.cpp - The forward pass of a training step -------------===//

#include "tessel/Dialect/Graph/Transforms/ForwardPass.h"

#include "mlir/IR/Operation.h"

#include "llvm/ADT/SmallVector.h"

llvm::DenseSet<mlir::Operation *> tessel::forwardPass(mlir::Block &body) {
  llvm::DenseSet<mlir::Operation *> forward;
  llvm::SmallVector<mlir::Operation *> work;
  for (mlir::Value v : body.getTerminator()->getOperands())
    if (mlir::Operation *d = v.getDefiningOp())
      work.push_back(d);
  while (!work.empty()) {
    mlir::Operation *op = work.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (mlir::Value x : op->getOperands())
      if (mlir::Operation *d = x.getDefiningOp())
        work.push_back(d);
  }
  return forward;
}
