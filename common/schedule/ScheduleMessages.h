//===- ScheduleMessages.h - Shared pieces of the schedule code ---*- C++ -*-===//
//
// What the builder, the checker and the simulation of pipeline schedules agree on: which
// sizes are valid, where a virtual stage lives, and how a send finds its receive.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_COMMON_SCHEDULE_SCHEDULEMESSAGES_H
#define TESSEL_COMMON_SCHEDULE_SCHEDULEMESSAGES_H

#include "common/schedule/Schedule.h"

#include <string>
#include <tuple>
#include <vector>

namespace tessel::pipeline::detail {

/// Checks the sizes for `kind`; false with the reason in `error`.
bool validateSizes(ScheduleKind kind, int stages, int microbatches, int virtualStages,
                   std::string &error);

/// The global virtual stage of `chunk` on `rank`, and back.
inline int stageOf(int rank, int chunk, int stages) { return chunk * stages + rank; }
inline int rankOfStage(int stage, int stages) { return stage % stages; }
inline int chunkOfStage(int stage, int stages) { return stage / stages; }

/// What a send and its receive have in common: whether it is a gradient, the micro-batch and
/// the virtual stage that consumes it.
struct MessageKey {
  bool gradient;
  int microbatch;
  int destination;
  bool operator<(const MessageKey &other) const {
    return std::tie(gradient, microbatch, destination) <
           std::tie(other.gradient, other.microbatch, other.destination);
  }
};

/// The key of a send or receive on `rank` (a send's chunk produced the data, a receive's
/// chunk consumes it).
inline MessageKey messageKey(const Action &action, int rank, int stages) {
  int stage = stageOf(rank, action.chunk, stages);
  switch (action.kind) {
  case Action::SendActivation:
    return {false, action.microbatch, stage + 1};
  case Action::SendGrad:
    return {true, action.microbatch, stage - 1};
  case Action::RecvGrad:
    return {true, action.microbatch, stage};
  default: // RecvActivation
    return {false, action.microbatch, stage};
  }
}

inline bool isSend(Action::Kind kind) {
  return kind == Action::SendActivation || kind == Action::SendGrad;
}
inline bool isRecv(Action::Kind kind) {
  return kind == Action::RecvActivation || kind == Action::RecvGrad;
}

/// The end of the exchange that starts at `begin` of a rank's list: an exchange is a maximal
/// run of consecutive sends and receives, which the runtime posts together and waits for
/// together (PipelineWalk, Communicator::exchange).
inline size_t exchangeEnd(const std::vector<Action> &list, size_t begin) {
  while (begin < list.size() && isCommunication(list[begin].kind))
    ++begin;
  return begin;
}

/// Runs `lists` with rendezvous messages, an exchange at a time: a rank posts its next
/// exchange once the computations before it are done and waits until every message in it is
/// done, and a send is done only together with its receive, which must be posted too — how
/// NCCL's sends and MPI's synchronous sends behave. True when every rank reaches its end;
/// otherwise `stuck` says which ranks wait, at which action of their lists.
bool runExchanges(int stages, const std::vector<std::vector<Action>> &lists, std::string &stuck);

} // namespace tessel::pipeline::detail

#endif // TESSEL_COMMON_SCHEDULE_SCHEDULEMESSAGES_H
