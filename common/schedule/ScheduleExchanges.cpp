//===- ScheduleExchanges.cpp - Rendezvous messages, an exchange at a time -===//
//
// Over NCCL a send is done only once its receive runs (MPI's synchronous sends likewise), so a
// rank that sends and then receives waits in the send. Two neighbours that each send to the
// other before receiving would wait forever unless both messages are in flight at once: the
// runtime posts each run of consecutive messages in a rank's list, an exchange, as one group.
// This file runs lists that way, to prove that they cannot deadlock there (ScheduleCheck.cpp).
//
//===----------------------------------------------------------------------===//

#include "common/schedule/ScheduleMessages.h"

namespace tessel::pipeline::detail {

namespace {

struct Message {
  Action action;
  int index;         ///< Where it is in the rank's list.
  bool done = false; ///< Sent and received.
};

class ExchangeRun {
public:
  ExchangeRun(int stages, const std::vector<std::vector<Action>> &lists)
      : p_(stages), ranks_(lists.size()), at_(lists.size(), 0) {
    for (size_t r = 0; r < lists.size(); ++r) {
      const std::vector<Action> &list = lists[r];
      for (size_t i = 0; i < list.size();) {
        if (!isCommunication(list[i].kind)) {
          ++i;
          continue;
        }
        std::vector<Message> &exchange = ranks_[r].emplace_back();
        for (const size_t end = exchangeEnd(list, i); i < end; ++i) {
          exchange.push_back({list[i], static_cast<int>(i)});
          chunks_ = chunks_ || list[i].chunk != 0;
        }
      }
    }
  }

  /// Runs until every rank is at its end (true) or none can go on.
  bool run() {
    for (;;) {
      bool progress = match();
      bool finished = true;
      for (size_t r = 0; r < ranks_.size(); ++r) {
        while (!atEnd(r) && headDone(r)) {
          ++at_[r];
          progress = true;
        }
        finished = finished && atEnd(r);
      }
      if (finished)
        return true;
      if (!progress)
        return false;
    }
  }

  std::string stuck() const {
    std::string text;
    int shown = 0;
    for (size_t r = 0; r < ranks_.size() && shown < 4; ++r) {
      if (atEnd(r))
        continue;
      for (const Message &m : head(r))
        if (!m.done) {
          text += (shown++ ? "; " : "") + std::string("rank ") + std::to_string(r) + ", action " +
                  std::to_string(m.index) + " (" + actionLabel(m.action, chunks_) +
                  ") waits for rank " + std::to_string(m.action.peer);
          break;
        }
    }
    return text;
  }

private:
  /// Past its last exchange.
  bool atEnd(size_t r) const { return at_[r] >= ranks_[r].size(); }
  /// The exchange the rank has posted: its computations before it are done.
  const std::vector<Message> &head(size_t r) const { return ranks_[r][at_[r]]; }
  std::vector<Message> &head(size_t r) { return ranks_[r][at_[r]]; }
  bool headDone(size_t r) const {
    for (const Message &m : head(r))
      if (!m.done)
        return false;
    return true;
  }

  /// Pairs every send in a posted exchange with its receive, where that is posted too.
  bool match() {
    bool progress = false;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (atEnd(r))
        continue;
      for (Message &send : head(r)) {
        const int s = send.action.peer;
        if (send.done || !isSend(send.action.kind) || s < 0 ||
            s >= static_cast<int>(ranks_.size()) || atEnd(s))
          continue;
        const MessageKey key = messageKey(send.action, static_cast<int>(r), p_);
        for (Message &recv : head(s)) {
          if (recv.done || !isRecv(recv.action.kind) || recv.action.peer != static_cast<int>(r))
            continue;
          const MessageKey other = messageKey(recv.action, s, p_);
          if (key < other || other < key)
            continue;
          send.done = recv.done = true;
          progress = true;
          break;
        }
      }
    }
    return progress;
  }

  int p_;
  std::vector<std::vector<std::vector<Message>>> ranks_; ///< Each rank's exchanges in order.
  std::vector<size_t> at_;                               ///< Each rank's posted exchange.
  bool chunks_ = false; ///< Whether labels name chunks (some action is not on chunk 0).
};

} // namespace

bool runExchanges(int stages, const std::vector<std::vector<Action>> &lists, std::string &stuck) {
  ExchangeRun run(stages, lists);
  if (run.run())
    return true;
  stuck = run.stuck();
  return false;
}

} // namespace tessel::pipeline::detail
