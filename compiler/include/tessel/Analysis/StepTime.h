//===- StepTime.h - How long a plan's training step takes on a cluster -*- C++ -*-===//
//
// The step-time model of `tessel estimate --cluster` (docs/planning.md states every formula).
// It reads the plan the runtime will execute, not a formula of the model: each kernel call is
// timed by a roofline with the cluster's efficiency by shape (GEMMs and attention against the
// peak rate, the other kernels against the memory bandwidth), each collective by an α–β cost
// of the cheaper of ring and tree over the link its group crosses (a group whose ranks share a
// node uses the intra-node link; the mesh order decides which groups do). A program runs its
// kernels in order on a compute stream; a collective started with an event (bucketed gradient
// reduction) runs on a communication stream beside it and only what is not hidden behind the
// compute before its `wait` is exposed. A pipeline's stages get their own predicted forward and
// backward times and the schedule is simulated with them (ScheduleSimulate).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_ANALYSIS_STEPTIME_H
#define TESSEL_ANALYSIS_STEPTIME_H

#include "common/cluster/Cluster.h"
#include "common/plan/PlanFile.h"
#include "common/schedule/Timeline.h"

#include <map>
#include <string>

namespace llvm::json {
class OStream;
} // namespace llvm::json

namespace tessel {

/// Where the time of one rank's step goes, in seconds. compute + recompute + exposed comm +
/// bubble + optimizer = step.
struct StepBreakdown {
  double compute = 0;   ///< Forward and backward kernels, recomputation excluded.
  double recompute = 0; ///< Kernels that recompute forward values in the backward pass.
  /// Communication the compute stream waits for, by group ("tp", "dp", "pp").
  std::map<std::string, double> exposed;
  double hidden = 0;    ///< Communication hidden behind compute.
  double bubble = 0;    ///< Pipeline idle time of the slowest stage.
  double optimizer = 0; ///< The optimizer step with its gradient reduction.
};

/// The predicted time of one kernel (or collective) over a step, and its calls, as the
/// runner's `--profile` reports the measured ones.
struct KernelCost {
  double seconds = 0;
  double calls = 0;
};

struct StepPrediction {
  std::string cluster;
  double step = 0;   ///< Seconds per optimizer step (the slowest rank's).
  double tokens = 0; ///< Tokens per optimizer step.
  double tokensPerSecond = 0;
  /// Model FLOPs per step (GEMMs and attention of forward and backward, over all ranks,
  /// recomputation excluded) and hardware FLOPs (recomputation included).
  double modelFlops = 0, hardwareFlops = 0;
  double mfu = 0, hfu = 0; ///< Over worldSize × peak × step.
  double flopsPerRank = 0; ///< Hardware FLOP/s achieved per accelerator.
  StepBreakdown breakdown; ///< Of the slowest pipeline stage.
  /// The slowest stage's first rank's kernels by name (" (recomputed)" appended to those the
  /// plan marks recomputed), collectives by their whole α–β time, exposed or not.
  std::map<std::string, KernelCost> kernels;
  /// The rank whose kernels `kernels` lists (the slowest stage's first rank).
  uint32_t kernelsRank = 0;
  /// The predicted pipeline timeline, in seconds, when the plan has a pipeline.
  pipeline::Timeline timeline;
  bool pipelined = false;
};

/// Predicts the step time of `plan` on `cluster`: every rank of a pipeline stage runs the same
/// programs, so the work is done once per stage, whatever dp and tp are.
StepPrediction predictStep(const planfile::Plan &plan, const cluster::Cluster &cluster);

/// The predicted seconds of each instruction of `program` on `rank` (the compute stream's time
/// from the previous instruction's end to its own: a collective left running beside compute
/// counts where its `wait` waits for it), as predictStep times the program.
std::vector<double> instructionSeconds(const planfile::Plan &plan, const cluster::Cluster &cluster,
                                       const planfile::Program &program, uint32_t rank);

/// FLOPs of one optimizer step over all ranks, as predictStep counts them but whatever the
/// cluster: model FLOPs (GEMMs and attention, forward and backward, recomputation excluded)
/// and hardware FLOPs (recomputation included). The plan writer records them for the
/// runner's MFU.
struct StepFlops {
  double model = 0, hardware = 0;
};
StepFlops countStepFlops(const planfile::Plan &plan);

/// The prediction for people, and as a JSON object (the value `j` writes next).
std::string formatPrediction(const StepPrediction &p, double worldSize);
void predictionJson(llvm::json::OStream &j, const StepPrediction &p);

} // namespace tessel

#endif // TESSEL_ANALYSIS_STEPTIME_H
