//===- tessel-opt.cpp - mlir-opt with Tessel's dialects and passes --------===//
//
// For FileCheck tests and for users who want to inspect one pass at a time:
//   tessel-opt model.mlir --mlir-print-ir-after-all
//
//===----------------------------------------------------------------------===//

#include "Graph/GraphDialect.h"
#include "Plan/PlanDialect.h"
#include "Sched/SchedDialect.h"
#include "tessel/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry
      .insert<tessel::graph::GraphDialect, tessel::plan::PlanDialect, tessel::sched::SchedDialect,
              mlir::func::FuncDialect, mlir::memref::MemRefDialect, mlir::shard::ShardDialect>();
  // The generic cleanups are useful between our passes (canonicalize, cse, symbol-dce).
  mlir::registerTransformsPasses();
  tessel::registerTesselPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessel optimizer driver\n", registry));
}
