//===- ScheduleExchanges.cpp - Rendezvous messages, an exchange at a time -===//
//
// Over NCCL a send is done only once its receive runs (MPI's synchronous sends likewise), so a
// rank that sends and then receives waits in the send. Two neighbours that each send to the
// other before receiving would wait forever unless both messages are in flight at once: the
// runtime posts each run of consecutive messages in a rank's list, an exchange, as one group.
// This file runs lists that way, to prove them (ScheduleCheck.cpp) and to move sends until
// every exchange meets its peers' (buildSchedule).
//
//===----------------------------------------------------------------------===//

#include "common/ScheduleMessages.h"

namespace tessel::pipeline::detail {

namespace {

struct Message {
  Action action;
  int index;         ///< Where it is in the rank's list as given; -1 once moved.
  bool done = false; ///< Sent and received.
};

/// A run of computations and the exchange after it (empty at the end of a list).
struct Segment {
  std::vector<Action> compute;
  std::vector<Message> exchange;
};

class ExchangeRun {
public:
  ExchangeRun(int stages, const std::vector<std::vector<Action>> &lists)
      : p_(stages), ranks_(lists.size()), at_(lists.size(), 0) {
    for (size_t r = 0; r < lists.size(); ++r) {
      std::vector<Segment> &segments = ranks_[r];
      segments.emplace_back();
      for (size_t i = 0; i < lists[r].size(); ++i) {
        const Action &a = lists[r][i];
        chunks_ = chunks_ || a.chunk != 0;
        if (isCommunication(a.kind)) {
          segments.back().exchange.push_back({a, static_cast<int>(i)});
          continue;
        }
        if (!segments.back().exchange.empty())
          segments.emplace_back();
        segments.back().compute.push_back(a);
      }
    }
  }

  /// Runs until every rank is at its end (true) or none can go on; with `pair`, moves sends
  /// while that helps.
  bool run(bool pair) {
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
      if (!progress && !(pair && moveWaitingSends()))
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

  std::vector<std::vector<Action>> lists() const {
    std::vector<std::vector<Action>> out(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r)
      for (const Segment &s : ranks_[r]) {
        out[r].insert(out[r].end(), s.compute.begin(), s.compute.end());
        for (const Message &m : s.exchange)
          out[r].push_back(m.action);
      }
    return out;
  }

private:
  /// Past its last segment (an empty exchange, at the end of a list or left by a move, is
  /// done at once).
  bool atEnd(size_t r) const { return at_[r] >= ranks_[r].size(); }
  const std::vector<Message> &head(size_t r) const { return ranks_[r][at_[r]].exchange; }
  std::vector<Message> &head(size_t r) { return ranks_[r][at_[r]].exchange; }
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

  /// Moves the first waiting send of each waiting rank to the front of the rank's next
  /// exchange; false if none could move.
  bool moveWaitingSends() {
    bool moved = false;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (atEnd(r) || at_[r] + 1 >= ranks_[r].size())
        continue; // nothing follows: a send cannot go later than it is
      std::vector<Message> &now = head(r);
      for (size_t i = 0; i < now.size(); ++i) {
        if (now[i].done || !isSend(now[i].action.kind))
          continue;
        Message m = now[i];
        m.index = -1;
        now.erase(now.begin() + static_cast<std::ptrdiff_t>(i));
        std::vector<Message> &next = ranks_[r][at_[r] + 1].exchange;
        next.insert(next.begin(), m);
        moved = true;
        break;
      }
    }
    return moved;
  }

  int p_;
  std::vector<std::vector<Segment>> ranks_;
  std::vector<size_t> at_; ///< Each rank's segment whose exchange is posted.
  bool chunks_ = false;    ///< Whether labels name chunks (some action is not on chunk 0).
};

} // namespace

bool runExchanges(int stages, const std::vector<std::vector<Action>> &lists, std::string &stuck) {
  ExchangeRun run(stages, lists);
  if (run.run(/*pair=*/false))
    return true;
  stuck = run.stuck();
  return false;
}

bool pairExchanges(int stages, std::vector<std::vector<Action>> &lists, std::string &error) {
  ExchangeRun run(stages, lists);
  if (!run.run(/*pair=*/true)) {
    error = "no order of sends lets the ranks exchange their messages: " + run.stuck();
    return false;
  }
  lists = run.lists();
  return true;
}

} // namespace tessel::pipeline::detail
