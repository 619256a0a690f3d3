//===- Timeline.h - Timed pipeline actions and their pictures ----*- C++ -*-===//
//
// A timeline is what each pipeline rank did and when: predicted by simulating a schedule
// (Schedule.h) or recorded while a run trains. Both kinds are summarised the same way (the
// bubble, the micro-batches in flight) and drawn the same way — as a Chrome trace that
// Perfetto opens and as an SVG grid of ranks over time — so a prediction and a measurement
// can be put side by side.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_COMMON_SCHEDULE_TIMELINE_H
#define TESSEL_COMMON_SCHEDULE_TIMELINE_H

#include "common/schedule/PipelineAction.h"

#include <string>
#include <vector>

namespace tessel::pipeline {

/// One action of one rank with its interval. Times are seconds from an origin common to all
/// ranks (a simulation reads its costs as seconds).
struct TimedAction {
  int rank;
  Action action;
  double start;
  double end;
};

/// What the ranks did, and figures read off it by summarizeTimeline:
/// - compute time: the summed durations of F, B, B (input) and W actions, over all ranks;
/// - makespan: the latest end minus the earliest start, over all ranks;
/// - bubbleFraction = 1 - compute / (ranks * makespan): the share of rank-time not spent
///   computing (idle, waiting or communicating). Under costs F = 1, B = 2 and free transfers,
///   AFAB and 1F1B give (p-1)/(m+p-1);
/// - bubbleOverIdeal = (ranks * makespan - compute) / compute: the same lost time relative to
///   the ideal compute time. This is the bubble as the literature states it, (p-1)/m for AFAB
///   and 1F1B and (p-1)/(v*m) for interleaved 1F1B under those costs;
/// - peakInFlight[r]: the most (micro-batch, chunk) pairs whose F has run on rank r and whose
///   B (or B input) has not, i.e. whose activations rank r holds. With one chunk per rank that
///   is micro-batches; an interleaved chunk holds 1/v of the rank's layers, so divide by v to
///   compare. What W still needs after B (zero-bubble schedules) is not counted.
struct Timeline {
  int ranks = 0;
  std::vector<TimedAction> actions;
  double makespan = 0;
  double bubbleFraction = 0;
  double bubbleOverIdeal = 0;
  std::vector<int> peakInFlight;
};

/// Builds a timeline of `ranks` ranks from recorded or simulated actions and computes its
/// figures. Actions may come in any order; a rank's actions are ordered by start time.
Timeline summarizeTimeline(int ranks, std::vector<TimedAction> actions);

/// The timeline in the Trace Event Format (opens in Perfetto and chrome://tracing): one
/// complete ("X") event per action with ts and dur in microseconds, pid 0 and tid the rank,
/// named by actionLabel (with the chunk when any action has a chunk other than 0) and of
/// category forward, backward or communication; thread_name metadata names each rank
/// "rank r", process_name metadata carries `title`.
std::string chromeTraceJson(const Timeline &timeline, const std::string &title);

/// The schedule grid as a standalone SVG: one row per rank (a <g class="rank"> each), time
/// left to right, boxes coloured by forward, backward (input), weight gradient and
/// communication on a grey idle background, micro-batch numbers in boxes wide enough for
/// them, a legend, and the title with the bubble figures.
std::string scheduleSvg(const Timeline &timeline, const std::string &title);

} // namespace tessel::pipeline

#endif // TESSEL_COMMON_SCHEDULE_TIMELINE_H
