//===- PipelineRank.h - One rank's part of a pipelined run ------*- C++ -*-===//
//
// A pipeline rank runs its stage's action list through the shared walk (common/layout/PipelineWalk.h):
// the walk keeps the stash and decides what moves where; this class runs the rank's programs on
// its Executor, moves messages through its Communicator, feeds the host's micro-batches and
// times every action for the step's timeline. At setup the same walk runs dry, which proves
// every value is there when a program reads it and gives the stash's peak before anything runs.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_PIPELINE_PIPELINERANK_H
#define TESSEL_RUNTIME_PIPELINE_PIPELINERANK_H

#include "common/layout/PipelineLayout.h"
#include "common/layout/PipelineWalk.h"
#include "common/schedule/Timeline.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Executor.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

// The pipeline model is shared with the compiler (common/); the runtime names it as its own.
using pipeline::PipelineChain;
using pipeline::PipelineConfig;
using pipeline::PipelineLayout;
using pipeline::readPipelineConfig;

/// One micro-batch of host data: whole tensors, as a one-rank run samples them; each program
/// that reads `tokens` or `targets` takes the rank's block.
struct MicroBatchData {
  std::vector<int32_t> tokens, targets;
};

class PipelineRank {
public:
  using Clock = std::chrono::steady_clock;

  /// What `rank` of `plan` runs of `layout`; both must outlive it. Walks the rank's lists
  /// without running them, so a value that a program would need before it is produced or
  /// received is an error here.
  static std::unique_ptr<PipelineRank> create(const PipelineLayout &layout,
                                              const planfile::Plan &plan, uint32_t rank,
                                              std::string &error);
  ~PipelineRank();

  uint32_t stage() const { return walk_.stage(); }

  /// Runs the rank's actions of one training step; micro-batch i runs with `step` (its micro
  /// set to i) on batches[i] (one per micro-batch of the pipeline). Action times are seconds since
  /// `origin`. A failure aborts `comm` with "rank R: " and the reason, so no other rank waits for
  /// this one. With `checkFinite`, every program stops at the first kernel output that is not
  /// finite and names it (Executor::run), which locates where a diverging step went wrong.
  bool runStep(Executor &ex, Communicator &comm, const StepContext &step,
               const std::vector<MicroBatchData> &batches, Clock::time_point origin,
               std::string &error, bool checkFinite = false);
  /// Runs the rank's chunks of a forward-only chain ("eval" or "sample") on one batch, in
  /// ascending order: receive from the previous chunk, run, send to the next.
  bool runChain(const PipelineChain &chain, Executor &ex, Communicator &comm,
                const StepContext &ctx, const MicroBatchData &data, std::string &error);

  /// The loss of each micro-batch of the last step (on the ranks of the last stage).
  const std::vector<float> &losses() const { return losses_; }
  /// The last chunk's host output of the last chain run: its loss or logits.
  const std::vector<float> &chainOutput() const { return chainOutput_; }
  /// The most bytes the stash held at once: from the walk at setup, then from every run.
  uint64_t peakStashBytes() const;
  /// What the rank did in the last step, each action with its stage as the row.
  const std::vector<pipeline::TimedAction> &timed() const { return timed_; }

private:
  class Run;

  PipelineRank(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank);

  const PipelineLayout &layout_;
  const planfile::Plan &plan_;
  pipeline::PipelineWalk walk_;
  std::vector<float> losses_, chainOutput_;
  std::vector<pipeline::TimedAction> timed_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_PIPELINE_PIPELINERANK_H
