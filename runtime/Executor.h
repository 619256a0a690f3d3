//===- Executor.h - Runs the programs of one rank's plan --------*- C++ -*-===//
//
// Owns the rank's persistent state and its arena, decodes every instruction of every program
// once (kernel, operand pointers, parameter checks against the operand sizes), then runs
// programs on demand. Runs are deterministic: the same plan, state, inputs and step context
// give the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_EXECUTOR_H
#define TESSEL_RUNTIME_EXECUTOR_H

#include "runtime/PlanFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

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
  /// does not fit its operands, or an operand count a kernel does not take is an error.
  static std::unique_ptr<Executor> create(const planfile::Plan &plan, uint32_t rank,
                                          std::string &error);
  ~Executor();

  const planfile::Plan &plan() const { return plan_; }
  uint64_t arenaBytes() const { return arenaBytes_; }

  /// A persistent tensor's index by name, or -1; its data.
  int stateIndex(const std::string &name) const;
  float *stateData(size_t index) { return state_[index].data(); }
  const float *stateData(size_t index) const { return state_[index].data(); }

  bool hasProgram(const std::string &name) const;
  /// Where the host writes input `port` of `program` before running it.
  void *input(const std::string &program, const std::string &port);
  /// Where output `port` of `program` is after a run.
  const float *output(const std::string &program, const std::string &port) const;

  /// Runs `program`. With `checkFinite`, stops at the first instruction that writes a
  /// non-finite value and names it, with its spec location, in `error`.
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

  planfile::Plan plan_;
  uint32_t rank_;
  uint64_t arenaBytes_ = 0;
  float *arena_ = nullptr;
  std::vector<std::vector<float>> state_;
  std::vector<std::unique_ptr<DecodedProgram>> programs_;
  bool profiling_ = false;
  std::vector<KernelTime> times_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_EXECUTOR_H
