//===- Pipelines.cpp - Pass pipelines of the driver -----------------------===//

#include "tessel/Pipelines/Pipelines.h"
#include "tessel/Conversion/Passes.h"
#include "tessel/Dialect/Graph/Transforms/Passes.h"
#include "tessel/Dialect/Plan/Transforms/Passes.h"
#include "tessel/Dialect/Sched/Transforms/Passes.h"

void tessel::buildTrainingPipeline(mlir::OpPassManager &pm) {
  pm.addPass(createRecognizeAttention());
  pm.addPass(createAutodiff());
  pm.addPass(createBuildOptimizer());
  pm.addPass(createDeriveSampler());
}

void tessel::buildShardingPipeline(mlir::OpPassManager &pm) {
  pm.addPass(createPipelineSchedule());
  pm.addPass(createPartition());
  pm.addPass(createVerifySharding());
  pm.addPass(createSaveAttentionStatistics());
  pm.addPass(createRecompute());
  pm.addPass(createPipelineSplit());
  pm.addPass(createBucketGradients());
  pm.addPass(createVerifySharding());
}

void tessel::buildPlanPipeline(mlir::OpPassManager &pm, const PlanPipelineOptions &options) {
  // Ops are per-rank and final here (sharded, recomputed, split into pipeline pieces), so a
  // fused group is exactly what one rank runs.
  if (options.fuseLinearCrossEntropy) {
    FuseLinearCrossEntropyOptions lce;
    lce.chunk = options.lossChunk;
    pm.addPass(createFuseLinearCrossEntropy(lce));
  }
  if (options.fuseElementwise)
    pm.addPass(createFuseElementwise());
  pm.addPass(createLowerToPlan());
  // Before memory planning, so the gradient buffers the GEMMs no longer write are not placed.
  pm.addPass(createFoldAccumulate());
  // With every buffer's kernels known, the spec's precision picks each buffer's element type
  // (fp32 plans are left as they are); memory planning then sizes buffers by it.
  pm.addPass(createMixedPrecision());
  // After mixed precision has given AdamW its working copies, so that they merge too.
  pm.addPass(createGroupOptimizer());
  pm.addPass(createPlanMemory());
}

void tessel::buildDecoderDerivation(mlir::OpPassManager &pm,
                                    const DecoderPipelineOptions &options) {
  pm.addPass(createRecognizeAttention());
  DeriveDecoderOptions derive;
  derive.batches.assign(options.batches.begin(), options.batches.end());
  derive.prefill = options.prefill;
  derive.block = options.block;
  derive.cacheBlocks = options.cacheBlocks;
  pm.addPass(createDeriveDecoder(derive));
}

void tessel::buildDecoderPipeline(mlir::OpPassManager &pm, const DecoderPipelineOptions &options) {
  buildDecoderDerivation(pm, options);
  pm.addPass(createPartition());
  pm.addPass(createVerifySharding());
  if (options.fuseElementwise)
    pm.addPass(createFuseElementwise());
  pm.addPass(createLowerToPlan());
  pm.addPass(createMixedPrecision());
  pm.addPass(createPlanMemory());
}
