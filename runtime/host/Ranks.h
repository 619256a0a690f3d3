//===- Ranks.h - The ranks of a run in this process -------------*- C++ -*-===//
//
// The ranks this process runs, each with its own Executor (its state, its arena) and its end
// of a communicator. Started without a launcher, a plan of N ranks runs as N threads of this
// process over a LocalCommunicator: the threads live as long as the run; the host hands them
// one program at a time, which they run all at once. With one rank the program runs on the
// calling thread and nothing else is created. Started by an MPI launcher (MpiCommunicator.h),
// each process runs one rank, on its calling thread, and the host loop runs in every process
// alike: every process reads the same data and makes the same decisions. On the CUDA device a
// launcher means one GPU per process over NCCL (NcclCommunicator.h), and torchrun's variables
// (Rendezvous.h) are a launcher too; without one the ranks are threads whose devices share the
// process's GPUs, their LocalCommunicator reaching GPU memory through each device's CommMemory.
//
// The host writes whole inputs, and each local rank takes its block (Blocks.h); a rank whose
// pipeline stage does not hold a tensor takes no part in it. Of the data, a process reads only
// the rows of the batch its ranks take (dataRows). State stays in the ranks' blocks:
// the host sets it from whole tensors one at a time (initialisation) and otherwise reads it
// block by block (checkpoints, checks). Outputs are replicated over the ranks; they are read
// from rank 0 and shared with every process.
//
// A plan with a pipeline (PipelineLayout.h) runs a training step as one job: every rank runs
// its stage's action list at once (PipelineRank.h), and the host reads the losses from the
// last stage and the step's timeline from the stages of the pipeline that holds rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_RANKS_H
#define TESSEL_RUNTIME_HOST_RANKS_H

#include "common/layout/PipelineLayout.h"
#include "common/plan/PlanFile.h"
#include "common/schedule/Timeline.h"
#include "runtime/comm/Communicator.h"
#include "runtime/core/Blocks.h"
#include "runtime/core/Executor.h"
#include "runtime/host/RankThreads.h"
#include "runtime/pipeline/PipelineRank.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt {

/// Which rows of a batch of `rows` rows `ranks` take: row i is marked if some program that
/// one of them runs has a data input (`tokens`, `targets`) of `rows` rows in all whose block
/// for that rank holds row i. A rank takes its data-parallel share of the rows, and none when
/// its pipeline stage reads no data; the ranks of a whole run take every row.
std::vector<bool> dataRowsOf(const planfile::Plan &plan, const std::vector<uint32_t> &ranks,
                             int64_t rows);

/// The splits of the world an NCCL communicator makes for `plan` (nccl::createCommunicator),
/// in an order every rank computes alike: one per group of the plan (this rank's instance of
/// it), then one per distinct (group, members) of the plan's all_reduce calls over `members`
/// (this rank's subgroup, where it is one of the members; the subgroups one `members` picks
/// from a group's disjoint instances are disjoint, so one split serves them all).
std::vector<std::optional<CommGroup>> ncclSplitsOf(const planfile::Plan &plan, uint32_t rank);

class Ranks {
public:
  /// Checks and decodes `plan` for every rank; `threads` compute threads are shared out,
  /// max(1, threads / ranks) to each rank. Fails if an Executor cannot be created, the blocks
  /// of a state tensor that its holders hold do not make up the whole tensor, or the plan's
  /// pipeline is inconsistent (PipelineLayout::create, PipelineRank::create).
  ///
  /// `device` is where the ranks compute: "cpu", or "cuda" (this process's ranks share its
  /// GPUs in turn; without a GPU, or with a kernel the CUDA device lacks, creation fails with
  /// the reason).
  static std::unique_ptr<Ranks> create(const planfile::Plan &plan, int threads, std::string &error,
                                       const std::string &device = "cpu");
  ~Ranks();
  Ranks(const Ranks &) = delete;
  Ranks &operator=(const Ranks &) = delete;

  /// The ranks of the world, in all processes.
  uint32_t size() const { return static_cast<uint32_t>(executors_.size()); }
  const planfile::Plan &plan() const { return plan_; }
  int threadsPerRank() const { return threadsPerRank_; }
  /// The ranks this process runs, ascending.
  const std::vector<uint32_t> &localRanks() const { return local_; }
  bool isLocal(uint32_t rank) const { return executors_[rank] != nullptr; }
  /// The processes of the run, and this one's index; processes > 1 under MPI.
  uint32_t processCount() const { return processCount_; }
  uint32_t processIndex() const { return processIndex_; }
  /// Whether this process speaks for the run: it prints, writes metrics and manifests.
  bool isMainProcess() const { return processIndex_ == 0; }
  /// A local rank's Executor.
  Executor &executor(uint32_t rank) { return *executors_[rank]; }
  const Executor &executor(uint32_t rank) const { return *executors_[rank]; }
  /// The Executor of this process's first rank.
  Executor &firstExecutor() { return *executors_[local_[0]]; }

  /// Runs `program` on every rank at once (see Executor::run). With several ranks a failure
  /// is reported as the first one, "rank R: ...": the rank that failed first, not the ranks
  /// whose collectives failed because of it.
  bool run(const std::string &program, const StepContext &ctx, std::string &error,
           bool checkFinite = false);

  /// Which of the `rows` rows of a batch this process's ranks take (see dataRowsOf).
  std::vector<bool> dataRows(int64_t rows) const { return dataRowsOf(plan_, local_, rows); }

  /// Whether `program` has input `port`.
  bool hasInput(const std::string &program, const std::string &port) const;
  /// Writes a whole tensor of `elements` 4-byte elements to input `port` of `program`: each
  /// rank copies its block. Fails if the port's whole tensor has another size.
  bool writeInput(const std::string &program, const std::string &port, const void *whole,
                  int64_t elements, std::string &error);
  /// Output `port` of `program`, from rank 0 (shared with every process); null if there is
  /// none.
  const float *output(const std::string &program, const std::string &port) const;

  /// The whole shape of state tensor `index`.
  const std::vector<int64_t> &stateShape(size_t index) const {
    return stateBlocks_[index][0].whole;
  }
  /// Rank `rank`'s block of state tensor `index`.
  const Block &stateBlock(size_t index, uint32_t rank) const { return stateBlocks_[index][rank]; }
  /// Whether `rank` is the one that speaks for its block of state tensor `index` (the lowest
  /// rank holding that block): each block of a tensor has exactly one such rank.
  bool ownsBlock(size_t index, uint32_t rank) const;
  /// State tensor `index` as a whole, assembled into `scratch` (each block from the lowest
  /// rank holding it). Only where this process runs every rank.
  const float *wholeState(size_t index, std::vector<float> &scratch) const;
  /// Sets state tensor `index` from a whole tensor: each local rank that holds it keeps its
  /// block.
  void setWholeState(size_t index, const float *whole);

  /// Gathers `bytes` bytes from every process into `all`, in process order (processCount()
  /// records of `bytes`). Every process must call it at the same point.
  bool gatherFromProcesses(const void *mine, size_t bytes, std::vector<char> &all,
                           std::string &error);

  /// Sets how long each rank's communication may wait for its peers (Communicator.h).
  void setWaitLimit(const WaitLimit &limit);

  /// The plan's pipeline, or null when it has none.
  const PipelineLayout *pipeline() const { return pipeline_.get(); }
  /// Runs one training step through the pipeline: batches[i] is micro-batch i (there are
  /// pipeline.microbatches of them; `step`'s micro is not read); `losses` receives each one's
  /// loss. Errors as run().
  bool runPipelineStep(const StepContext &step, const std::vector<MicroBatchData> &batches,
                       std::vector<float> &losses, std::string &error, bool checkFinite = false);
  /// Runs the "eval" or "sample" chain of the pipeline on one batch; `output` receives the
  /// last chunk's `loss` or `logits`.
  bool runForwardChain(const std::string &kind, const StepContext &ctx, const MicroBatchData &data,
                       std::vector<float> &output, std::string &error);
  /// What the stages of the pipeline holding rank 0 did in the last step, one row per stage.
  pipeline::Timeline lastTimeline() const;
  /// The most bytes rank `rank` keeps between pipeline programs in a step (0 without a
  /// pipeline).
  uint64_t pipelineStashBytes(uint32_t rank) const;

private:
  using Work = RankThreads::Work;

  explicit Ranks(const planfile::Plan &plan) : plan_(plan) {}
  static std::unique_ptr<Ranks> createRanks(const planfile::Plan &plan, int threads,
                                            std::string &error, const std::string &device);
  /// Runs `work` on every local rank at once; the first failure as run() reports it.
  bool runOnEveryRank(const Work &work, std::string &error);
  /// Copies `bytes` at `data` on the process running `rank` to `data` on every process.
  bool shareFromRank(uint32_t rank, void *data, size_t bytes, std::string &error);
  /// Shares the outputs of `program` from rank 0 with every process.
  bool shareOutputs(const std::string &program, std::string &error);

  planfile::Plan plan_;
  int threadsPerRank_ = 1;
  uint32_t processCount_ = 1, processIndex_ = 0;
  std::vector<uint32_t> local_;
  /// Per world rank: this process's end of the communicator, and the rank's Executor; null
  /// for the ranks of other processes.
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<Executor>> executors_;
  /// Under MPI: the group of all processes, as this one sees it.
  CommGroup processes_;
  /// Under MPI: outputs shared from rank 0, by program and port.
  std::map<std::pair<std::string, std::string>, std::vector<float>> sharedOutputs_;
  /// Per state tensor, per rank: the rank's block.
  std::vector<std::vector<Block>> stateBlocks_;
  /// Per state tensor: the ranks whose blocks make up the whole tensor, one per block.
  std::vector<std::vector<uint32_t>> stateHolders_;
  std::unique_ptr<PipelineLayout> pipeline_;
  std::vector<std::unique_ptr<PipelineRank>> pipelineRanks_; ///< Per world rank; null if remote.

  /// The local ranks as threads, where this process runs several.
  std::unique_ptr<RankThreads> threads_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_RANKS_H
