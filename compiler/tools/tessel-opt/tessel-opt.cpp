//===- tessel-opt.cpp - mlir-opt with Tessel's dialects and passes --------===//
//
// For FileCheck tests and for users who want to inspect one pass at a time:
//   tessel-opt model.mlir --mlir-print-ir-after-all
//   tessel-opt graph.mlir --tessel-training-pipeline --tessel-sharding-pipeline
//
// The pipelines `tessel compile` runs are registered by name, so the IR between them can be
// taken apart and fed back: --emit=graph, then each pipeline in turn.
//
//===----------------------------------------------------------------------===//

#include "tessel/Conversion/Passes.h"
#include "tessel/Dialect/Graph/IR/GraphDialect.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"
#include "tessel/Dialect/Plan/IR/PlanDialect.h"
#include "tessel/Dialect/Plan/Transforms/Passes.h"
#include "tessel/Dialect/Sched/IR/SchedDialect.h"
#include "tessel/Dialect/Sched/Transforms/Passes.h"
#include "tessel/Dialect/Settings/IR/SettingsDialect.h"
#include "tessel/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

namespace {

/// The plan pipeline's options, as `--tessel-plan-pipeline="fuse=false"` spells them.
struct PlanPipelineFlags : mlir::PassPipelineOptions<PlanPipelineFlags> {
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse chains of elementwise ops (tessel --fuse=on|off)"),
                    llvm::cl::init(true)};
  Option<bool> fuseLoss{*this, "fuse-loss",
                        llvm::cl::desc("Fuse the output head with cross-entropy (tessel "
                                       "--fuse-loss=on|off)"),
                        llvm::cl::init(true)};
  Option<int64_t> lossChunk{*this, "loss-chunk",
                            llvm::cl::desc("Rows of logits at a time (tessel --loss-chunk)"),
                            llvm::cl::init(0)};
};

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry
      .insert<tessel::graph::GraphDialect, tessel::plan::PlanDialect, tessel::sched::SchedDialect,
              tessel::settings::SettingsDialect, mlir::func::FuncDialect,
              mlir::memref::MemRefDialect, mlir::shard::ShardDialect>();
  // The generic cleanups are useful between our passes (canonicalize, cse, symbol-dce).
  mlir::registerTransformsPasses();
  tessel::registerGraphTransformsPasses();
  tessel::registerSchedTransformsPasses();
  tessel::registerPlanTransformsPasses();
  tessel::registerTesselConversionPasses();
  mlir::PassPipelineRegistration<>(
      "tessel-training-pipeline",
      "Graph IR from the front end to the training functions (as tessel compile --emit=train)",
      tessel::buildTrainingPipeline);
  mlir::PassPipelineRegistration<>(
      "tessel-sharding-pipeline",
      "The training functions laid over the mesh (as tessel compile --emit=sharded)",
      tessel::buildShardingPipeline);
  mlir::PassPipelineRegistration<PlanPipelineFlags>(
      "tessel-plan-pipeline", "Sharded graph IR to a memory-planned plan module (--emit=plan)",
      [](mlir::OpPassManager &pm, const PlanPipelineFlags &flags) {
        tessel::buildPlanPipeline(
            pm,
            tessel::PlanPipelineOptions{flags.fuse, flags.fuse && flags.fuseLoss, flags.lossChunk});
      });
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Tessel optimizer driver\n", registry));
}
