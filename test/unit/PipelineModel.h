//===- PipelineModel.h - A hand-written pipelined plan for the tests -*- C++ -*-===//
//
// A small linear model cut into chunks, written two ways from one description: as a pipelined
// plan (forward.c / backward.c programs on the ranks of stage c % p, parameters held by their
// stage only) and as the same math fused into the SPMD programs of a plan without a pipeline
// (forward_backward runs every chunk forward, then every chunk backward). The kernels and their
// order per micro-batch are the same in both, so the two give the same bits.
//
// Chunk 0 embeds the tokens (table E) and scales by w0; chunk c scales by w_c; the last chunk
// also embeds the targets (table T, no gradient) and its loss is sum(y * T[targets]), summed
// over data-parallel replicas. Every chunk's backward pass accumulates the gradient of w_c
// (and chunk 0 that of E), all-reduced over "dp".
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_PIPELINEMODEL_H
#define TESSEL_TEST_UNIT_PIPELINEMODEL_H

#include "common/plan/PlanFile.h"
#include "common/schedule/Schedule.h"

#include <cstdint>
#include <string>

namespace tessel::test {

struct PipelineModel {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
  int stages = 2, virtualStages = 1, microbatches = 4, dp = 1;
  int64_t rows = 2; ///< Rows of a micro-batch on one data-parallel replica.
  int64_t seq = 3, vocab = 256, dim = 4;

  int chunks() const { return stages * virtualStages; }
  /// Tokens of a whole micro-batch (every replica's rows).
  int64_t batchTokens() const { return dp * rows * seq; }

  /// The pipelined plan: world = stages × dp, rank = dp index × stages + stage.
  planfile::Plan pipelined() const;
  /// The same model without a pipeline: world = dp, SPMD.
  planfile::Plan fused() const;
};

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_PIPELINEMODEL_H
