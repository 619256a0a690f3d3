//===- Schedule.h - Pipeline schedules: build, check, simulate ---*- C++ -*-===//
//
// The pipeline-parallel schedules a spec can name — all-forward-all-backward (GPipe), 1F1B,
// interleaved 1F1B with v model chunks per rank (Megatron-LM), and ZB-H1 (Qi et al. 2023,
// "Zero Bubble Pipeline Parallelism") — as one ordered action list per rank, with the sends
// and receives between neighbouring stages written out. A checker proves a set of lists
// complete and free of deadlock, and a simulation times them to give the bubble and the
// activations in flight. No MLIR or LLVM: the compiler writes these lists into its IR and
// the runtime executes and records them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_COMMON_SCHEDULE_SCHEDULE_H
#define TESSEL_COMMON_SCHEDULE_SCHEDULE_H

#include "common/schedule/PipelineAction.h"
#include "common/schedule/ScheduleKind.h"
#include "common/schedule/Timeline.h"

#include <string>
#include <vector>

namespace tessel::pipeline {

/// One action list per rank, in execution order, for `stages` ranks, `microbatches`
/// micro-batches and `virtualStages` model chunks per rank (1 except for interleaved). A
/// receive comes right before the computation that needs it and a send right after the one
/// that produces it, except where two ranks would then wait in sends to each other when a send
/// is done only with its receive (NCCL): such a send moves to the rank's next exchange, the
/// messages between two computations, which the runtime posts together (Megatron-LM pairs its
/// sends with receives the same way). Where both stages are on one rank (one rank,
/// interleaved) the data stays local and there is neither. On bad sizes returns no lists and
/// sets `error`; otherwise leaves `error` as it was.
///
/// - AFAB: every F in micro-batch order, then every B in micro-batch order. Rank r holds all
///   m micro-batches' activations at its peak.
/// - 1F1B (PipeDream-Flush): p - r - 1 warm-up F's, then F and B alternate, then the
///   remaining B's; at most p - r micro-batches in flight on rank r. Needs m >= p.
/// - Interleaved: Megatron-LM's order over m * v (micro-batch, chunk) units: micro-batches
///   in groups of p, each group through chunk 0, then chunk 1, ...; 2(p - r - 1) + (v - 1)p
///   warm-up F's on rank r, then 1F1B. Needs v >= 2 and m a multiple of p, as Megatron-LM.
/// - ZB-H1: 1F1B's order of F's and B's with each B split into B (input gradient) and W
///   (weight gradient). Rank r keeps r W's waiting during the steady phase and runs them in
///   the tail, where 1F1B waits for gradients; the F/B order, hence the peak of activations
///   in flight, is 1F1B's. Needs m >= p.
std::vector<std::vector<Action>> buildSchedule(ScheduleKind kind, int stages, int microbatches,
                                               int virtualStages, std::string &error);

/// Checks that `lists` is a correct schedule for the sizes: one list per rank; every
/// (micro-batch, virtual stage) has exactly one F on its rank and exactly one B (B and then W
/// for ZB-H1) after it; the input of an F arrives by a receive placed before it and its
/// output leaves by a send placed after it, gradients likewise in reverse stage order; every
/// send has exactly one matching receive on its peer (same kind, micro-batch and destination
/// stage), and the activations (gradients) a rank sends another arrive in the order they
/// were sent — the communicator pairs the k-th send and k-th receive of a tag, so one tag per
/// kind suffices; and the lists run to the end when executed, both with buffered sends (a
/// send never waits, a receive waits for its send: threads) and with rendezvous sends (a send
/// is done only together with its receive: NCCL, MPI's synchronous sends), each rank posting
/// an exchange — a maximal run of consecutive messages in its list — at a time and waiting for
/// all of it. Returns false with the first problem in `error`.
bool checkSchedule(ScheduleKind kind, int stages, int microbatches, int virtualStages,
                   const std::vector<std::vector<Action>> &lists, std::string &error);

/// The time each action takes in a simulation, per model chunk (an interleaved chunk is
/// 1/v of a rank's layers, so the same costs give every schedule the same compute per chunk
/// and the bubble ratios stay comparable).
struct Costs {
  double forward = 1;
  double backward = 2;
  double backwardInput = 1;
  double backwardWeight = 1;
  double transfer = 0;
};

/// Times `lists` (which should pass checkSchedule): each rank runs its list in order. A
/// computation takes its cost. An exchange (the messages between two computations) is posted
/// whole when its rank is free; a message moves once its send and its receive are both posted
/// (a send waits for its receive, as over NCCL) and takes the sending chunk's `transfer`; the
/// rank goes on when all of the exchange's messages have arrived. A send is timed from when it
/// moves to its arrival, a receive as an instant at the arrival, so waiting shows as idle time
/// before it. Actions that could never run (a list that deadlocks) are left out.
Timeline simulate(ScheduleKind kind, int stages, int microbatches, int virtualStages,
                  const std::vector<std::vector<Action>> &lists, const Costs &costs = Costs());
/// The same with costs per model chunk (`chunkCosts[c]` for chunk c, which runs on rank
/// c % stages; p * v entries): a step-time prediction gives each stage its own predicted
/// costs, so a stage with the embedding or the loss head takes longer.
Timeline simulate(ScheduleKind kind, int stages, int microbatches, int virtualStages,
                  const std::vector<std::vector<Action>> &lists,
                  const std::vector<Costs> &chunkCosts);
/// The makespan that simulate() would give (its actions start at 0), without recording the
/// timeline: what a search over thousands of layouts needs.
double simulateMakespan(int stages, int microbatches, int virtualStages,
                        const std::vector<std::vector<Action>> &lists,
                        const std::vector<Costs> &chunkCosts);

/// The textbook bubble relative to the ideal compute time: (p-1)/m for AFAB and 1F1B,
/// (p-1)/(v*m) for interleaved 1F1B; NaN for ZB-H1, which has no closed form here (its
/// figure comes from simulate).
double analyticBubble(ScheduleKind kind, int stages, int microbatches, int virtualStages);

} // namespace tessel::pipeline

#endif // TESSEL_COMMON_SCHEDULE_SCHEDULE_H
