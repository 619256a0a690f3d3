//===- PlanLiveness.h - When each arena buffer of a program holds a value -*- C++ -*-===//
//
// The one statement of a buffer's lifetime in the arena: the memory planner places buffers by
// it (PlanMemory), and the plan file records it per buffer (planfile::ArenaBuffer), from which
// `tessel estimate --memory-svg` draws a step's memory and the runner's --memory-trace checks
// what the kernels actually touch.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_ANALYSIS_PLANLIVENESS_H
#define TESSEL_ANALYSIS_PLANLIVENESS_H

#include "tessel/Dialect/Plan/IR/PlanDialect.h"

#include <vector>

namespace tessel::plan {

/// One arena buffer (a plan.alloc or plan.input) of a program and when it holds a value.
struct ArenaLifetime {
  mlir::Operation *owner; ///< The plan.alloc or plan.input.
  /// Op indices in the program's body, inclusive: a program input from 0 (the host writes it
  /// before the run), an alloc from its first use (through views); to its last use, or to the
  /// body's end (its op count) for a program output.
  int64_t begin, end;
  /// The same span in kernel indices (the plan file's instructions), inclusive; first > last
  /// for an alloc no kernel uses.
  int64_t firstKernel, lastKernel;
  /// Bytes of the value (elements times width), before the planner's alignment.
  int64_t bytes;
  planfile::BufferKind kind;
};

/// The arena buffers of `program`, in body order, with their kinds: a program input; a value
/// recomputed for the backward pass (its first writer is a recomputed kernel); a forward value
/// kept for the backward pass (the program's "loss" output depends on it, and a kernel that
/// writes nothing the loss depends on reads it); else a temporary.
std::vector<ArenaLifetime> arenaLifetimes(ProgramOp program);

} // namespace tessel::plan

#endif // TESSEL_ANALYSIS_PLANLIVENESS_H
