//===- PipelineRank.h - One rank's part of a pipelined run ------*- C++ -*-===//
//
// A pipeline rank runs its stage's action list: a computation runs its chunk's program on one
// micro-batch, a send or receive moves the values one chunk passes to its neighbour. Between
// actions the rank keeps those values in its stash, keyed by micro-batch and name: a program
// copies its inputs out of the stash and its outputs into it, and a value is dropped as soon as
// its last taker on the rank (a program, or the send that carries it away) has it, so the
// stash holds what the schedule has in flight and no more. Every action is timed for the
// step's timeline.
//
// The same walk, without programs or transfers, runs once at setup: it proves that every value
// is in the stash when a program asks for it and gives the stash's peak before anything runs.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_PIPELINERANK_H
#define TESSEL_RUNTIME_PIPELINERANK_H

#include "runtime/Communicator.h"
#include "runtime/Executor.h"
#include "runtime/PipelineLayout.h"
#include "runtime/Timeline.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

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

  uint32_t stage() const { return stage_; }

  /// Runs the rank's actions of one training step; micro-batch i runs with StepContext{step,
  /// i, seed} on batches[i] (one per micro-batch of the pipeline). Action times are seconds since
  /// `origin`. A failure aborts `comm` with "rank R: " and the reason, so no other rank waits for
  /// this one. With `checkFinite`, every program stops at the first kernel output that is not
  /// finite and names it (Executor::run), which locates where a diverging step went wrong.
  bool runStep(Executor &ex, Communicator &comm, int64_t step, uint64_t seed,
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

  struct RankChain;
  class Stash;

private:
  /// A walk's inputs; without an executor it moves no data and runs nothing.
  struct Run {
    Executor *ex = nullptr;
    Communicator *comm = nullptr;
    const std::vector<MicroBatchData> *batches = nullptr;
    StepContext ctx;
    bool checkFinite = false; ///< Stop at the first kernel output that is not finite.
  };

  PipelineRank(const PipelineLayout &layout, const planfile::Plan &plan, uint32_t rank);
  bool walkStep(const Run &run, Clock::time_point origin, std::string &error);
  bool walkChain(const RankChain &chain, const Run &run, std::string &error);
  bool perform(const pipeline::Action &action, const Run &run, std::string &error);
  bool compute(const RankChain &chain, const std::string &program, int chunk, int micro,
               const Run &run, std::string &error);
  bool send(const RankChain &chain, const std::vector<std::string> &ports, int micro,
            uint32_t toStage, int64_t tag, const Run &run, std::string &error);
  bool receive(const RankChain &chain, const std::vector<std::string> &ports, int micro,
               uint32_t fromStage, int64_t tag, const Run &run, std::string &error);
  bool copyHostInput(const planfile::Port &port, const std::string &program,
                     const MicroBatchData &data, Executor &ex, std::string &error);

  const PipelineLayout &layout_;
  const planfile::Plan &plan_;
  uint32_t rank_, stage_;
  std::unique_ptr<RankChain> step_;
  std::map<std::string, std::unique_ptr<RankChain>> chains_;
  std::unique_ptr<Stash> stash_;
  std::vector<float> message_;
  std::vector<float> losses_, chainOutput_;
  std::vector<pipeline::TimedAction> timed_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_PIPELINERANK_H
