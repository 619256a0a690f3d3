//===- PipelinePieces.h - The pipeline split's placement of ops -*- C++ -*-===//
//
// Private to the pipeline split (PipelineSplit.cpp, PipelineOptimizerSteps.cpp): where each op
// runs (a virtual stage and a phase), the split of the layers over the stages, and which
// stages hold each parameter.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_SCHED_TRANSFORMS_PIPELINEPIECES_H
#define TESSEL_DIALECT_SCHED_TRANSFORMS_PIPELINEPIECES_H

#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tessel::pipeline_split {

enum class Phase { Forward, Backward, Weight };

/// Where an op runs: a virtual stage (a "chunk": stage c runs on pipeline rank c % p) and a
/// phase of it.
struct Segment {
  int64_t chunk = 0;
  Phase phase = Phase::Forward;
  bool operator==(const Segment &o) const { return chunk == o.chunk && phase == o.phase; }
  bool operator!=(const Segment &o) const { return !(*this == o); }
};

/// The split of the layers, from the `sched.pipeline` the schedule pass wrote.
struct Stages {
  int64_t p = 1, v = 1;
  bool zeroBubble = false;
  std::vector<int64_t> chunkOfLayer;
  int64_t chunks() const { return p * v; }
  int64_t stageOf(int64_t chunk) const { return chunk % p; }
};

using Placement = llvm::DenseMap<mlir::Operation *, Segment>;

/// The stages whose pieces use each parameter (read it or accumulate its gradient).
using Owners = std::map<std::string, std::set<int64_t>>;

/// Adds to `owners` the stages where `func`'s pieces (placed by `seg`) read a parameter or
/// accumulate its gradient.
void recordOwners(mlir::func::FuncOp func, const Placement &seg, const Stages &st, Owners &owners);

/// Checks that evaluation and sampling read only parameters training places on their stage.
mlir::LogicalResult checkOwners(mlir::func::FuncOp func, const Placement &seg, const Stages &st,
                                const Owners &owners);

/// One optimizer step per pipeline stage: the updates of the parameters the stage holds.
/// A tied parameter's gradient is first summed over its stages; the clipping norm counts it
/// once (on its first stage) and all-reduces the sum of squares over `pp`.
mlir::LogicalResult splitOptimizer(mlir::ModuleOp module, mlir::func::FuncOp opt,
                                   const Owners &owners, const Stages &st, int16_t ppAxis);

} // namespace tessel::pipeline_split

#endif // TESSEL_DIALECT_SCHED_TRANSFORMS_PIPELINEPIECES_H
