//===- KernelTrace.h - A training step's kernels as a Chrome trace -*- C++ -*-===//
//
// `--trace FILE` on a plan without a pipeline: every kernel and collective each rank ran in
// the last step (its forward-backward passes and the optimizer step), on the device's timers
// where it has them, as one complete event each in the Trace Event Format that Perfetto and
// chrome://tracing open. A rank is a process of the trace (its streams its threads), so ranks
// as threads or as MPI processes read alike. A pipelined plan's trace is its schedule
// (PipelineReport.h).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_KERNELTRACE_H
#define TESSEL_RUNTIME_HOST_KERNELTRACE_H

#include "runtime/core/Executor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt {

/// One rank's calls, as Executor::takeTrace gave them.
struct RankTrace {
  uint32_t rank = 0;
  std::vector<Executor::TraceSpan> spans;
};

/// The events of `ranks` as comma-separated JSON objects (no enclosing array), with times in
/// microseconds from `origin` (seconds of Executor::traceClock): a fragment that another
/// process's fragments can be joined to.
std::string kernelTraceEvents(const std::vector<RankTrace> &ranks, double origin);

/// A whole trace from fragments of kernelTraceEvents (empty ones are skipped), titled `title`.
std::string kernelTraceJson(const std::vector<std::string> &fragments, const std::string &title);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_KERNELTRACE_H
