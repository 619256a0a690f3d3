//===- Passes.h - Tessel's passes -------------------------------*- C++ -*-===//
#ifndef TESSEL_TRANSFORMS_PASSES_H
#define TESSEL_TRANSFORMS_PASSES_H

#include "Graph/GraphDialect.h"
#include "Plan/PlanDialect.h"
#include "Sched/SchedDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace tessel {

#define GEN_PASS_DECL
#include "tessel/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Transforms/Passes.h.inc"

/// Adds the passes that turn graph IR from the front end into the training functions:
/// autodiff, optimizer and sampler.
void buildTrainingPipeline(mlir::OpPassManager &pm);

/// Adds the passes that lay the training functions over the mesh: partition (per-rank types
/// and collectives), its verifier, and gradient bucketing.
void buildShardingPipeline(mlir::OpPassManager &pm);

/// Settings of the plan pipeline.
struct PlanPipelineOptions {
  /// Groups elementwise ops into fused ops (`tessel --fuse=off` turns it off).
  bool fuseElementwise = true;
  /// Fuses the output head with its cross-entropy (`tessel --fuse-loss=off` or `--fuse=off`
  /// turn it off).
  bool fuseLinearCrossEntropy = true;
  /// Rows of logits the fused head computes at a time (0: the pass's automatic choice).
  int64_t lossChunk = 0;
};

/// Adds the passes from (partitioned) training graph IR to a memory-planned plan module:
/// the output head's fusion with its loss, elementwise fusion, lowering to the plan dialect,
/// memory planning.
void buildPlanPipeline(mlir::OpPassManager &pm, const PlanPipelineOptions &options = {});

} // namespace tessel

#endif // TESSEL_TRANSFORMS_PASSES_H
