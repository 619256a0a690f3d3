//===- ScheduleCheck.cpp - Proving a pipeline schedule correct ------------===//
//
// A schedule is checked in three passes: each action on its own (sizes, peers, duplicates),
// then each (micro-batch, virtual stage) against its neighbours (the data it needs arrives
// before it and what it produces leaves after it), then the whole set of lists is executed
// twice to show that no rank waits forever: with buffered sends (threads), and with
// rendezvous sends posted an exchange at a time (NCCL, MPI; ScheduleExchanges.cpp).
//
//===----------------------------------------------------------------------===//

#include "common/schedule/Schedule.h"
#include "common/schedule/ScheduleMessages.h"

#include <cstdint>
#include <map>
#include <tuple>

namespace tessel::pipeline {

namespace {

using detail::isSend;
using detail::MessageKey;
using detail::messageKey;
using detail::rankOfStage;
using detail::stageOf;

/// Where each computation and message of a schedule is: positions in its rank's list, -1
/// where absent. Indexed by micro-batch * stages + virtual stage (for messages, the stage
/// that consumes them); the rank follows from the stage. A message also has its place in
/// the sequence of messages of its kind over its link.
struct Positions {
  Positions(int units)
      : forward(units, -1), backward(units, -1), input(units, -1), weight(units, -1) {
    for (int g = 0; g < 2; ++g) {
      send[g].assign(units, -1);
      recv[g].assign(units, -1);
      sendSequence[g].assign(units, -1);
      recvSequence[g].assign(units, -1);
    }
  }
  std::vector<int> forward, backward, input, weight;
  std::vector<int> send[2], recv[2]; // [gradient]
  std::vector<int> sendSequence[2], recvSequence[2];
};

class Checker {
public:
  Checker(ScheduleKind kind, int p, int m, int v, const std::vector<std::vector<Action>> &lists,
          std::string &error)
      : kind_(kind), p_(p), m_(m), v_(v), stages_(p * v), lists_(lists), error_(error),
        at_(m * p * v) {}

  bool run() {
    if (static_cast<int>(lists_.size()) != p_)
      return fail("the schedule has " + std::to_string(lists_.size()) + " rank lists for " +
                  std::to_string(p_) + " stages");
    for (int r = 0; r < p_; ++r)
      for (int i = 0; i < static_cast<int>(lists_[r].size()); ++i)
        if (!record(r, i))
          return false;
    for (int mb = 0; mb < m_; ++mb)
      for (int s = 0; s < stages_; ++s)
        if (!checkUnit(mb, s))
          return false;
    return runToEnd();
  }

private:
  bool fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  std::string where(int rank, int index) const {
    return "rank " + std::to_string(rank) + ", action " + std::to_string(index) + " (" +
           actionLabel(lists_[rank][index], v_ > 1) + ")";
  }
  std::string unitName(int mb, int stage) const {
    return "micro-batch " + std::to_string(mb) + " of stage " + std::to_string(stage);
  }
  int unit(int mb, int stage) const { return mb * stages_ + stage; }

  /// Checks one action alone and notes its position.
  bool record(int r, int i) {
    const Action &a = lists_[r][i];
    if (a.microbatch < 0 || a.microbatch >= m_ || a.chunk < 0 || a.chunk >= v_)
      return fail(where(r, i) + ": micro-batch or chunk out of range (m = " + std::to_string(m_) +
                  ", v = " + std::to_string(v_) + ")");
    int stage = stageOf(r, a.chunk, p_);
    if (isCompute(a.kind)) {
      if (a.peer != -1)
        return fail(where(r, i) + ": a computation has no peer (peer = " + std::to_string(a.peer) +
                    ")");
      bool split = kind_ == ScheduleKind::ZBH1;
      if (a.kind == Action::Backward && split)
        return fail(where(r, i) + ": zbh1 splits every backward pass into B (input) and W");
      if ((a.kind == Action::BackwardInput || a.kind == Action::BackwardWeight) && !split)
        return fail(where(r, i) + ": only zbh1 splits the backward pass");
      std::vector<int> &slot = a.kind == Action::Forward         ? at_.forward
                               : a.kind == Action::Backward      ? at_.backward
                               : a.kind == Action::BackwardInput ? at_.input
                                                                 : at_.weight;
      int &pos = slot[unit(a.microbatch, stage)];
      if (pos >= 0)
        return fail(where(r, i) + ": repeats action " + std::to_string(pos));
      pos = i;
      return true;
    }
    // A message: the neighbouring stage must exist and live on another rank.
    bool towardsNext = a.kind == Action::SendActivation || a.kind == Action::RecvGrad;
    int other = towardsNext ? stage + 1 : stage - 1;
    if (other < 0 || other >= stages_)
      return fail(where(r, i) + ": stage " + std::to_string(stage) + " has no " +
                  (towardsNext ? "next" : "previous") + " stage");
    int neighbour = rankOfStage(other, p_);
    if (neighbour == r)
      return fail(where(r, i) + ": stages " + std::to_string(stage) + " and " +
                  std::to_string(other) + " are both on rank " + std::to_string(r) +
                  ", so their data stays local");
    if (a.peer != neighbour)
      return fail(where(r, i) + ": the peer of stage " + std::to_string(stage) + " is rank " +
                  std::to_string(neighbour) + ", not " + std::to_string(a.peer));
    MessageKey key = messageKey(a, r, p_);
    int u = unit(key.microbatch, key.destination);
    bool sending = isSend(a.kind);
    int &pos = (sending ? at_.send : at_.recv)[key.gradient][u];
    if (pos >= 0)
      return fail(where(r, i) + ": repeats action " + std::to_string(pos));
    pos = i;
    int link = sending ? r * p_ + neighbour : neighbour * p_ + r;
    (sending ? at_.sendSequence : at_.recvSequence)[key.gradient][u] =
        linkCount_[{sending, key.gradient, link}]++;
    return true;
  }

  /// Checks that the data `consumer` (a position on rank `r`) needs from stage `from` (run at
  /// `producer` on its rank) arrives through a matching send and receive placed around them,
  /// or comes earlier on the same rank.
  bool checkFlow(int mb, int stage, int from, bool gradient, int consumer, int producer,
                 const char *what) {
    int r = rankOfStage(stage, p_), source = rankOfStage(from, p_);
    if (source == r) {
      if (producer > consumer)
        return fail(where(r, consumer) + ": runs before the " + what + " it needs from stage " +
                    std::to_string(from) + " on the same rank");
      return true;
    }
    int recv = at_.recv[gradient][unit(mb, stage)];
    int send = at_.send[gradient][unit(mb, stage)];
    if (recv < 0)
      return fail(where(r, consumer) + ": no receive of its " + what + " from rank " +
                  std::to_string(source));
    if (recv > consumer)
      return fail(where(r, recv) + ": comes after " + where(r, consumer) + ", which needs it");
    if (send < 0)
      return fail(where(r, recv) + ": rank " + std::to_string(source) + " never sends it");
    if (send < producer)
      return fail(where(source, send) + ": comes before " + where(source, producer) +
                  ", which produces it");
    int sent = at_.sendSequence[gradient][unit(mb, stage)];
    int received = at_.recvSequence[gradient][unit(mb, stage)];
    if (sent != received)
      return fail(where(r, recv) + ": is receive " + std::to_string(received) +
                  " of its kind from rank " + std::to_string(source) + " but " +
                  where(source, send) + " is send " + std::to_string(sent) +
                  "; the communicator pairs a link's messages in order");
    return true;
  }

  bool checkUnit(int mb, int s) {
    int r = rankOfStage(s, p_), u = unit(mb, s);
    std::string rankName = "rank " + std::to_string(r);
    int f = at_.forward[u];
    if (f < 0)
      return fail(rankName + " never runs the forward pass of " + unitName(mb, s));
    int b = kind_ == ScheduleKind::ZBH1 ? at_.input[u] : at_.backward[u];
    if (b < 0)
      return fail(rankName + " never runs the backward pass of " + unitName(mb, s));
    if (b < f)
      return fail(where(r, b) + ": runs before its forward pass, " + where(r, f));
    if (kind_ == ScheduleKind::ZBH1) {
      int w = at_.weight[u];
      if (w < 0)
        return fail(rankName + " never runs the weight gradient of " + unitName(mb, s));
      if (w < b)
        return fail(where(r, w) + ": runs before its backward pass, " + where(r, b));
    }
    if (s > 0 && !checkFlow(mb, s, s - 1, false, f, at_.forward[unit(mb, s - 1)], "activation"))
      return false;
    if (s + 1 < stages_) {
      int next = unit(mb, s + 1);
      int producer = kind_ == ScheduleKind::ZBH1 ? at_.input[next] : at_.backward[next];
      if (!checkFlow(mb, s, s + 1, true, b, producer, "gradient"))
        return false;
    }
    return true;
  }

  /// Executes the lists with buffered sends: a send completes at once and its message waits
  /// at the receiver; a receive blocks until its message is there. Computation order within
  /// a rank was checked above, so the messages are the only cross-rank dependencies.
  bool runToEnd() {
    std::vector<char> posted[2];
    posted[0].assign(at_.forward.size(), 0);
    posted[1].assign(at_.forward.size(), 0);
    std::vector<size_t> next(p_, 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < p_; ++r) {
        const std::vector<Action> &list = lists_[r];
        for (; next[r] < list.size(); ++next[r], progress = true) {
          const Action &a = list[next[r]];
          if (isCommunication(a.kind)) {
            MessageKey key = messageKey(a, r, p_);
            char &flag = posted[key.gradient][unit(key.microbatch, key.destination)];
            if (isSend(a.kind))
              flag = 1;
            else if (!flag)
              break;
          }
        }
      }
    }
    std::string stuck;
    int shown = 0;
    for (int r = 0; r < p_; ++r)
      if (next[r] < lists_[r].size() && shown++ < 4)
        stuck += (stuck.empty() ? "" : "; ") + where(r, static_cast<int>(next[r])) +
                 " waits for rank " + std::to_string(lists_[r][next[r]].peer);
    if (!stuck.empty())
      return fail("the schedule deadlocks: " + stuck);
    if (!detail::runExchanges(p_, lists_, stuck))
      return fail("the schedule deadlocks when a send waits for its receive (NCCL, MPI): " + stuck);
    return true;
  }

  ScheduleKind kind_;
  int p_, m_, v_, stages_;
  const std::vector<std::vector<Action>> &lists_;
  std::string &error_;
  Positions at_;
  /// Messages so far by (send, gradient, source * p + destination rank).
  std::map<std::tuple<bool, bool, int>, int> linkCount_;
};

} // namespace

bool checkSchedule(ScheduleKind kind, int p, int m, int v,
                   const std::vector<std::vector<Action>> &lists, std::string &error) {
  if (!detail::validateSizes(kind, p, m, v, error))
    return false;
  return Checker(kind, p, m, v, lists, error).run();
}

} // namespace tessel::pipeline
