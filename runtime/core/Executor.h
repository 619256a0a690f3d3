//===- Executor.h - Runs the programs of one rank's plan --------*- C++ -*-===//
//
// Owns the rank's persistent state and its arena, decodes every instruction of every program
// once (kernel, operand pointers, parameter checks against the operand sizes, the groups its
// collectives name, the events they start and end), then runs programs on demand. Runs are
// deterministic: the same plan, state, inputs and step context give the same bits.
//
// In a world of several ranks each rank has its own Executor, given that rank's end of the
// communicator; the collectives of its programs meet the other ranks' through it.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CORE_EXECUTOR_H
#define TESSEL_RUNTIME_CORE_EXECUTOR_H

#include "common/PlanFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

class Communicator;
struct RankContext;

/// What a kernel may read about the run: the optimizer step (from 1), the micro-batch within
/// it, and the run's seed (dropout masks derive from all three).
struct StepContext {
  int64_t step = 1;
  int64_t micro = 0;
  uint64_t seed = 0;
};

/// Sets the threads the CPU kernels (and GEMM, which slices its products over them) use.
void setComputeThreads(int threads);

class Executor {
public:
  /// Checks and decodes `plan` for `rank`: a kernel this runtime lacks, a parameter that
  /// does not fit its operands, an operand count a kernel does not take, a group the plan
  /// lacks, or a `wait` for an event no collective started is an error. A plan of more than
  /// one rank needs `comm`, this rank's end of a communicator of plan.worldSize ranks; it
  /// must outlive the Executor.
  static std::unique_ptr<Executor> create(const planfile::Plan &plan, uint32_t rank,
                                          std::string &error, Communicator *comm = nullptr);
  ~Executor();

  const planfile::Plan &plan() const { return plan_; }
  uint32_t rank() const { return rank_; }
  uint64_t arenaBytes() const { return arenaBytes_; }

  /// A persistent tensor's index by name, or -1; its data (null where the rank does not hold
  /// it: its pipeline stage is not among the tensor's `stages`).
  int stateIndex(const std::string &name) const;
  bool holdsState(size_t index) const { return !state_[index].empty(); }
  float *stateData(size_t index) { return holdsState(index) ? state_[index].data() : nullptr; }
  const float *stateData(size_t index) const {
    return holdsState(index) ? state_[index].data() : nullptr;
  }
  /// The bytes of the state tensors this rank holds.
  uint64_t stateBytes() const;

  bool hasProgram(const std::string &name) const;
  /// Where the host writes input `port` of `program` before running it.
  void *input(const std::string &program, const std::string &port);
  /// Where output `port` of `program` is after a run.
  const float *output(const std::string &program, const std::string &port) const;

  /// Runs `program`; every collective it started is done when it returns. With
  /// `checkFinite`, runs collectives synchronously and stops at the first instruction that
  /// writes a non-finite value, naming it, with its spec location, in `error`. A failure
  /// aborts the communicator (so the other ranks' collectives fail rather than wait for this
  /// one) with "rank R: " and the error.
  bool run(const std::string &program, const StepContext &ctx, std::string &error,
           bool checkFinite = false);

  /// Times every kernel call from now on; `profile()` sums seconds and calls per kernel.
  void enableProfiling() { profiling_ = true; }
  struct KernelTime {
    std::string kernel;
    double seconds = 0;
    int64_t calls = 0;
  };
  std::vector<KernelTime> profile() const;

  struct Decoded;
  struct DecodedProgram;

private:
  Executor(const planfile::Plan &plan, uint32_t rank);
  const DecodedProgram *find(const std::string &name) const;

  bool runInstructions(const DecodedProgram &p, const StepContext &ctx, std::string &error,
                       bool checkFinite);

  planfile::Plan plan_;
  uint32_t rank_;
  std::unique_ptr<RankContext> rankContext_;
  uint64_t arenaBytes_ = 0;
  float *arena_ = nullptr;
  std::vector<std::vector<float>> state_;
  std::vector<std::unique_ptr<DecodedProgram>> programs_;
  bool profiling_ = false;
  std::vector<KernelTime> times_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_EXECUTOR_H
