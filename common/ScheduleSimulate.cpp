//===- ScheduleSimulate.cpp - Timing a pipeline schedule ------------------===//
//
// Each rank runs its list in order, one action at a time; the only waits are receives,
// whose data is there when the matching send has ended. Because the lists fix each rank's
// order, the ranks can be advanced one after another until none can move: every action's
// start is then the later of its rank being free and its data arriving, exactly what an
// event-driven run in time order would give.
//
//===----------------------------------------------------------------------===//

#include "common/Schedule.h"
#include "common/ScheduleMessages.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::pipeline {

namespace {

double costOf(Action::Kind kind, const Costs &costs) {
  switch (kind) {
  case Action::Forward:
    return costs.forward;
  case Action::Backward:
    return costs.backward;
  case Action::BackwardInput:
    return costs.backwardInput;
  case Action::BackwardWeight:
    return costs.backwardWeight;
  case Action::SendActivation:
  case Action::SendGrad:
    return costs.transfer;
  case Action::RecvActivation:
  case Action::RecvGrad:
    return 0;
  }
  return 0;
}

} // namespace

Timeline simulate(ScheduleKind kind, int p, int m, int v,
                  const std::vector<std::vector<Action>> &lists, const Costs &costs) {
  return simulate(kind, p, m, v, lists, std::vector<Costs>(static_cast<size_t>(p * v), costs));
}

namespace {

/// Runs the lists; records each action into `timed` unless it is null. Returns the latest end.
double run(int p, int m, int v, const std::vector<std::vector<Action>> &lists,
           const std::vector<Costs> &chunkCosts, std::vector<TimedAction> *timed) {
  int ranks = static_cast<int>(lists.size());
  int stages = p * v;
  // When each message is there, by [gradient][micro-batch * stages + consuming stage]; NaN
  // until sent.
  std::vector<double> arrival[2];
  for (auto &times : arrival)
    times.assign(static_cast<size_t>(std::max(0, m * stages)),
                 std::numeric_limits<double>::quiet_NaN());
  auto arrivalOf = [&](const Action &a, int r) -> double * {
    detail::MessageKey key = detail::messageKey(a, r, p);
    if (key.microbatch < 0 || key.microbatch >= m || key.destination < 0 ||
        key.destination >= stages)
      return nullptr; // not a message of this pipeline: checkSchedule says why
    return &arrival[key.gradient][static_cast<size_t>(key.microbatch) * stages + key.destination];
  };

  double latest = 0;
  std::vector<size_t> next(ranks, 0);
  std::vector<double> clock(ranks, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      for (; next[r] < lists[r].size(); ++next[r], progress = true) {
        const Action &a = lists[r][next[r]];
        double start = clock[r];
        double *message = nullptr; // the arrival time this send sets or this receive waits for
        if (isCommunication(a.kind)) {
          message = arrivalOf(a, r);
          if (!message)
            break;
          if (detail::isRecv(a.kind)) {
            if (std::isnan(*message))
              break; // not sent yet
            start = std::max(start, *message);
          }
        }
        // Chunk c of rank r is the model's chunk c * p + r.
        size_t chunk =
            static_cast<size_t>(a.chunk) * static_cast<size_t>(p) + static_cast<size_t>(r);
        const Costs &costs = chunkCosts[std::min(chunk, chunkCosts.size() - 1)];
        double end = start + costOf(a.kind, costs);
        if (detail::isSend(a.kind))
          *message = end;
        clock[r] = end;
        latest = std::max(latest, end);
        if (timed)
          timed->push_back({r, a, start, end});
      }
    }
  }
  return latest;
}

} // namespace

Timeline simulate(ScheduleKind, int p, int m, int v, const std::vector<std::vector<Action>> &lists,
                  const std::vector<Costs> &chunkCosts) {
  std::vector<TimedAction> timed;
  run(p, m, v, lists, chunkCosts, &timed);
  return summarizeTimeline(static_cast<int>(lists.size()), std::move(timed));
}

double simulateMakespan(int p, int m, int v, const std::vector<std::vector<Action>> &lists,
                        const std::vector<Costs> &chunkCosts) {
  return run(p, m, v, lists, chunkCosts, nullptr);
}

} // namespace tessel::pipeline
