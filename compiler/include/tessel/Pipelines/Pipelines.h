//===- Pipelines.h - The pass pipelines of the driver -----------*- C++ -*-===//
//
// `tessel compile` runs these three in turn; tessel-opt registers each by name
// (--tessel-training-pipeline, --tessel-sharding-pipeline, --tessel-plan-pipeline).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_PIPELINES_PIPELINES_H
#define TESSEL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <vector>

namespace tessel {

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
/// mixed precision (the spec's `precision`), memory planning.
void buildPlanPipeline(mlir::OpPassManager &pm, const PlanPipelineOptions &options = {});

/// Settings of the decoder pipeline: the decode programs' shapes and the cache's
/// (-tessel-derive-decoder's options).
struct DecoderPipelineOptions {
  std::vector<int64_t> batches = {1, 2, 4, 8};
  int64_t prefill = 256;
  int64_t block = 16;
  int64_t cacheBlocks = 0;
  bool fuseElementwise = true;
};

/// Adds the passes from the front end's graph IR to the decode programs in the graph dialect
/// (`tessel compile --emit=decode`): attention recognition and decode derivation.
void buildDecoderDerivation(mlir::OpPassManager &pm, const DecoderPipelineOptions &options);

/// Adds the passes from the front end's graph IR to the decode programs' memory-planned plan
/// module, in a module of their own: attention recognition, decode derivation, partition,
/// elementwise fusion, lowering, mixed precision and memory planning. A model or layout the
/// decode programs do not cover leaves the module without functions and with the reason in
/// `tessel.decode_refused`; the later passes then have nothing to do.
void buildDecoderPipeline(mlir::OpPassManager &pm, const DecoderPipelineOptions &options);

} // namespace tessel

#endif // TESSEL_PIPELINES_PIPELINES_H
