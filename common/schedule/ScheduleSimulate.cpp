//===- ScheduleSimulate.cpp - Timing a pipeline schedule ------------------===//
//
// Each rank runs its list in order: a computation when the rank is free, an exchange (the
// messages between two computations) posted whole when the rank gets to it. A message moves
// once both its send and its receive are posted — a send waits for its receive, as NCCL's and
// MPI's synchronous sends do — and takes its sender's transfer time; the rank goes on when
// every message of the exchange has arrived. Because the lists fix each rank's order, the
// ranks can be advanced one after another until none can move: every action's time is then
// what an event-driven run in time order would give.
//
//===----------------------------------------------------------------------===//

#include "common/schedule/Schedule.h"
#include "common/schedule/ScheduleMessages.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessel::pipeline {

namespace {

/// The time of a computation (messages are timed by their exchange: `Costs::transfer`).
double computeCost(Action::Kind kind, const Costs &costs) {
  switch (kind) {
  case Action::Forward:
    return costs.forward;
  case Action::Backward:
    return costs.backward;
  case Action::BackwardInput:
    return costs.backwardInput;
  case Action::BackwardWeight:
    return costs.backwardWeight;
  default:
    return 0;
  }
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
  const int ranks = static_cast<int>(lists.size());
  const int stages = p * v;
  constexpr double kUnposted = std::numeric_limits<double>::quiet_NaN();
  // When each message's send and receive were posted, by [gradient][micro-batch * stages +
  // consuming stage]; NaN until then.
  struct Posted {
    double send = kUnposted, receive = kUnposted;
  };
  std::vector<Posted> posted[2];
  for (auto &times : posted)
    times.assign(static_cast<size_t>(std::max(0, m * stages)), Posted());
  auto postedOf = [&](const Action &a, int r) -> Posted * {
    detail::MessageKey key = detail::messageKey(a, r, p);
    if (key.microbatch < 0 || key.microbatch >= m || key.destination < 0 ||
        key.destination >= stages)
      return nullptr; // not a message of this pipeline: checkSchedule says why
    return &posted[key.gradient][static_cast<size_t>(key.microbatch) * stages + key.destination];
  };
  // Chunk c of rank r is the model's chunk c * p + r; a message costs its sender's transfer.
  auto costsOf = [&](size_t chunk) -> const Costs & {
    return chunkCosts[std::min(chunk, chunkCosts.size() - 1)];
  };
  auto senderOf = [&](const Action &a, int r) {
    const detail::MessageKey key = detail::messageKey(a, r, p);
    return static_cast<size_t>(std::max(0, key.destination + (key.gradient ? 1 : -1)));
  };

  double latest = 0;
  std::vector<size_t> next(ranks, 0);
  std::vector<double> clock(ranks, 0.0);
  // Each rank's exchanges run one after another: when its last one ended, and the range of a
  // sends-only exchange still in flight (the rank computes on meanwhile).
  std::vector<double> commFree(ranks, 0.0);
  std::vector<std::pair<size_t, size_t>> inFlight(ranks, {0, 0});
  std::vector<char> exchanging(ranks, 0); // whether the exchange at next[r] is posted
  // Posts the messages of [from, to) on rank r at `at` (once); false if one is not a message
  // of this pipeline.
  auto post = [&](int r, size_t from, size_t to, double at) {
    for (size_t i = from; i < to; ++i) {
      Posted *t = postedOf(lists[r][i], r);
      if (!t)
        return false;
      (detail::isSend(lists[r][i].kind) ? t->send : t->receive) = at;
    }
    return true;
  };
  // The time the messages of [from, to) on rank r have all arrived (recording them), or NaN
  // while one of them waits for its other end.
  auto arrived = [&](int r, size_t from, size_t to) {
    double done = 0;
    for (size_t i = from; i < to; ++i) {
      const Posted &t = *postedOf(lists[r][i], r);
      if (std::isnan(t.send) || std::isnan(t.receive))
        return kUnposted;
    }
    for (size_t i = from; i < to; ++i) {
      const Action &message = lists[r][i];
      const Posted &t = *postedOf(message, r);
      const double start = std::max(t.send, t.receive);
      const double arrival = start + costsOf(senderOf(message, r)).transfer;
      done = std::max(done, arrival);
      if (timed)
        timed->push_back({r, message, detail::isSend(message.kind) ? start : arrival, arrival});
    }
    return done;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      const std::vector<Action> &list = lists[r];
      for (;;) {
        if (inFlight[r].first < inFlight[r].second) {
          const double done = arrived(r, inFlight[r].first, inFlight[r].second);
          if (!std::isnan(done)) {
            commFree[r] = done;
            latest = std::max(latest, done);
            inFlight[r] = {0, 0};
            progress = true;
          }
        }
        if (next[r] >= list.size())
          break;
        const Action &a = list[next[r]];
        if (!isCommunication(a.kind)) {
          const size_t chunk =
              static_cast<size_t>(a.chunk) * static_cast<size_t>(p) + static_cast<size_t>(r);
          const double start = clock[r], end = start + computeCost(a.kind, costsOf(chunk));
          clock[r] = end;
          latest = std::max(latest, end);
          if (timed)
            timed->push_back({r, a, start, end});
          ++next[r];
          progress = true;
          continue;
        }
        // An exchange starts once the rank's computations before it and its previous
        // exchange are done; a message moves once both its ends are posted (a send waits for
        // its receive) and takes its sender's transfer time. An exchange with receives holds
        // the rank until it is done (a computation needs them next); one of sends only lets it
        // compute on.
        const size_t end = detail::exchangeEnd(list, next[r]);
        if (inFlight[r].first < inFlight[r].second)
          break;
        if (!exchanging[r]) {
          if (!post(r, next[r], end, std::max(clock[r], commFree[r])))
            break;
          exchanging[r] = 1;
          progress = true;
        }
        bool receives = false;
        for (size_t i = next[r]; i < end; ++i)
          receives = receives || detail::isRecv(list[i].kind);
        if (!receives) {
          inFlight[r] = {next[r], end};
        } else {
          const double done = arrived(r, next[r], end);
          if (std::isnan(done))
            break;
          clock[r] = commFree[r] = std::max(clock[r], done);
          latest = std::max(latest, done);
        }
        next[r] = end;
        exchanging[r] = 0;
        progress = true;
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
