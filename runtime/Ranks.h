//===- Ranks.h - The ranks of a run, as threads -----------------*- C++ -*-===//
//
// A plan of N ranks runs as N threads of this process, each with its own Executor (its state,
// its arena) and its end of a LocalCommunicator. The threads live as long as the run; the host
// hands them one program at a time, which they run all at once. With one rank the program runs
// on the calling thread and nothing else is created, so a one-rank run is exactly what it was
// before ranks existed.
//
// The host sees whole tensors: it writes whole inputs and reads and writes whole state
// tensors, and each rank takes or gives its block (Blocks.h). Outputs are replicated over the
// ranks; they are read from rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_RANKS_H
#define TESSEL_RUNTIME_RANKS_H

#include "runtime/Blocks.h"
#include "runtime/Communicator.h"
#include "runtime/Executor.h"
#include "runtime/PlanFile.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::rt {

class Ranks {
public:
  /// Checks and decodes `plan` for every rank; `threads` compute threads are shared out,
  /// max(1, threads / ranks) to each rank. Fails if an Executor cannot be created or the
  /// ranks' blocks of a state tensor do not make up the whole tensor.
  static std::unique_ptr<Ranks> create(const planfile::Plan &plan, int threads, std::string &error);
  ~Ranks();
  Ranks(const Ranks &) = delete;
  Ranks &operator=(const Ranks &) = delete;

  uint32_t size() const { return static_cast<uint32_t>(executors_.size()); }
  const planfile::Plan &plan() const { return executors_[0]->plan(); }
  int threadsPerRank() const { return threadsPerRank_; }
  Executor &executor(uint32_t rank) { return *executors_[rank]; }
  const Executor &executor(uint32_t rank) const { return *executors_[rank]; }

  /// Runs `program` on every rank at once (see Executor::run). With several ranks a failure
  /// is reported as the first one, "rank R: ...": the rank that failed first, not the ranks
  /// whose collectives failed because of it.
  bool run(const std::string &program, const StepContext &ctx, std::string &error,
           bool checkFinite = false);

  /// Whether `program` has input `port`.
  bool hasInput(const std::string &program, const std::string &port) const;
  /// Writes a whole tensor of `elements` 4-byte elements to input `port` of `program`: each
  /// rank copies its block. Fails if the port's whole tensor has another size.
  bool writeInput(const std::string &program, const std::string &port, const void *whole,
                  int64_t elements, std::string &error);
  /// Output `port` of `program`, from rank 0; null if there is none.
  const float *output(const std::string &program, const std::string &port) const;

  /// The whole shape of state tensor `index`.
  const std::vector<int64_t> &stateShape(size_t index) const {
    return stateBlocks_[index][0].whole;
  }
  /// State tensor `index` as a whole: rank 0's own data with one rank, else assembled into
  /// `scratch` (each block from the lowest rank holding it).
  const float *wholeState(size_t index, std::vector<float> &scratch) const;
  /// Sets state tensor `index` from a whole tensor: each rank keeps its block.
  void setWholeState(size_t index, const float *whole);

private:
  Ranks() = default;
  void serve(uint32_t rank);

  int threadsPerRank_ = 1;
  std::vector<std::unique_ptr<LocalCommunicator>> comms_;
  std::vector<std::unique_ptr<Executor>> executors_;
  /// Per state tensor, per rank: the rank's block.
  std::vector<std::vector<Block>> stateBlocks_;
  /// Per state tensor: the ranks whose blocks make up the whole tensor, one per block.
  std::vector<std::vector<uint32_t>> stateHolders_;

  // The program the rank threads run next, and what they report.
  struct Job {
    std::string program;
    StepContext ctx;
    bool checkFinite = false;
  };
  std::mutex mu_;
  std::condition_variable start_, done_;
  uint64_t generation_ = 0;
  uint32_t pending_ = 0;
  bool stopping_ = false;
  Job job_;
  std::vector<std::string> errors_;
  std::vector<std::thread> threads_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_RANKS_H
