//===- MemoryTrace.h - The runner's --memory-trace -------------*- C++ -*-===//
//
// Records the memory of the run's first training steps on every rank of this process, as
// common/memory/MemoryProfile.h describes it and from what the kernels actually touch
// (Executor::enableMemoryTrace), and writes the profiles as a Chrome trace of counters. The
// samples are placed as `tessel estimate --memory-trace` places the predicted ones — one per
// instruction and pipeline transfer, in order, and one at each step's start — so the two
// line up sample for sample. With MPI, the first process writes its own ranks' profiles.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_MEMORYTRACE_H
#define TESSEL_RUNTIME_HOST_MEMORYTRACE_H

#include "common/memory/MemoryProfile.h"
#include "runtime/host/Ranks.h"

#include <cstdint>
#include <map>
#include <string>

namespace tessel::rt {

class MemoryTrace {
public:
  /// Traces `steps` steps from `firstStep` on the local ranks of `ranks`, for `path`.
  MemoryTrace(const planfile::Plan &plan, Ranks &ranks, int64_t firstStep, int64_t steps,
              std::string path);

  /// Whether `step` is traced.
  bool traces(int64_t step) const { return step >= firstStep_ && step < firstStep_ + steps_; }
  /// Around a traced step: starts recording, and at the end takes what was recorded.
  void beginStep(int64_t step);
  void endStep(int64_t step);
  /// Writes the profiles (on the first process); false with the reason when it cannot, or when
  /// a kernel touched arena bytes that no buffer of the plan held then (a fault of the plan or
  /// the runtime, named).
  bool write(bool quiet, std::string &error);

private:
  const planfile::Plan &plan_;
  Ranks &ranks_;
  int64_t firstStep_, steps_;
  std::string path_;
  std::map<uint32_t, memory::MemoryProfile> profiles_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_MEMORYTRACE_H
