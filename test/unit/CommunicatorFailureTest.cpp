//===- CommunicatorFailureTest.cpp - Ranks that fail or hang --------------===//
//
// An abort, a rank that stops, a rank that hangs, ranks that wait for one another and ranks that
// disagree each fail every waiting rank with the reason (naming the rank that holds the others
// up) instead of hanging; misuse of sends, receives, tickets and groups is refused.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "test/unit/CommGroups.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

using namespace tessel::rt;

namespace {

using tessel::test::onRanks;
using tessel::test::worldGroup;

using Floats = std::vector<float>;

TEST(Communicator, AbortFailsEveryRankWithTheReason) {
  const uint32_t size = 4;
  const int64_t n = 16;
  std::vector<Floats> x(size, Floats(n, 1.0f)), y(size, Floats(n));
  std::vector<std::string> errors(size), later(size), pending(size);
  std::atomic<int> waiting{0};
  onRanks(size, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(size, r);
    if (r == 0) {
      // Fails instead of joining, once the others are (about to be) blocked in it.
      while (waiting.load() < static_cast<int>(size) - 1)
        std::this_thread::yield();
      c.abort("rank 0: out of memory");
      return;
    }
    CommOp op;
    op.kind = CommOp::Kind::AllReduce;
    op.group = &g;
    op.n = n;
    op.x = x[r].data();
    op.y = y[r].data();
    Communicator::Ticket queued = c.start(op); // A second one behind the first.
    ++waiting;
    EXPECT_FALSE(c.allReduce(g, ReduceOp::Sum, x[r].data(), y[r].data(), n, errors[r]));
    EXPECT_FALSE(c.wait(queued, pending[r]));
    EXPECT_FALSE(c.allReduce(g, ReduceOp::Sum, x[r].data(), y[r].data(), n, later[r]));
    std::string reason;
    EXPECT_TRUE(c.aborted(&reason));
    EXPECT_EQ(reason, "rank 0: out of memory");
  });
  for (uint32_t r = 1; r < size; ++r) {
    EXPECT_NE(errors[r].find("rank 0: out of memory"), std::string::npos) << errors[r];
    EXPECT_NE(pending[r].find("rank 0: out of memory"), std::string::npos) << pending[r];
    EXPECT_NE(later[r].find("rank 0: out of memory"), std::string::npos) << later[r];
  }
}

TEST(Communicator, FirstAbortReasonSticks) {
  auto comms = LocalCommunicator::createWorld(2);
  comms[1]->abort("first");
  comms[0]->abort("second");
  std::string reason;
  EXPECT_TRUE(comms[0]->aborted(&reason));
  EXPECT_EQ(reason, "first");
}

TEST(Communicator, RankThatStopsFailsItsPeers) {
  // Rank 1 finishes without joining the collective rank 0 waits in.
  float x = 1, y = 0;
  std::string error;
  onRanks(2, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(2, r);
    if (r == 1) {
      c.setRunning(false);
      return;
    }
    EXPECT_FALSE(c.allReduce(g, ReduceOp::Sum, &x, &y, 1, error));
  });
  EXPECT_NE(error.find("rank 1 stopped without joining all_reduce"), std::string::npos) << error;
}

/// A rank thread that is alive but never comes until release(): as one hung in a kernel.
class Hang {
public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return released_; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

TEST(Communicator, HungRankIsNamedOnceTheWaitLimitRunsOut) {
  // Ranks 0 and 1 wait in an all-reduce for rank 2, which is running but never comes.
  const uint32_t size = 3;
  Floats x(4, 1.0f), y(4);
  std::vector<std::string> errors(size);
  Hang hang;
  std::atomic<int> failed{0};
  onRanks(size, [&](uint32_t r, Communicator &c) {
    c.setWaitLimit({0.2, "a test's 0.2 s"});
    CommGroup g = worldGroup(size, r);
    if (r == 2)
      hang.wait();
    EXPECT_FALSE(c.allReduce(g, ReduceOp::Sum, x.data(), y.data(), 4, errors[r]));
    if (r != 2 && ++failed == 2)
      hang.release();
  });
  for (uint32_t r = 0; r < size; ++r)
    EXPECT_NE(errors[r].find("all_reduce f32(sum, n 4) #0 on group {0, 1, 2}: waited "),
              std::string::npos)
        << errors[r];
  EXPECT_NE(errors[0].find("(the limit: a test's 0.2 s) for rank 2, which waits for no peer: it "
                           "is hung, or far slower than expected"),
            std::string::npos)
      << errors[0];
  // The world is aborted with the first rank's reason: the late rank fails with it.
  EXPECT_NE(errors[2].find("the communicator was aborted: rank "), std::string::npos) << errors[2];
}

TEST(Communicator, TheWaitsAreFollowedToTheRankThatWaitsForNobody) {
  // Rank 0 receives from rank 1, which waits in an all-reduce with rank 2, which is hung: rank
  // 0 runs out of time first and names rank 2 through rank 1.
  const uint32_t size = 3;
  float x = 1, y = 0;
  std::vector<std::string> errors(size);
  Hang hang;
  onRanks(size, [&](uint32_t r, Communicator &c) {
    if (r == 0) {
      c.setWaitLimit({1.0, "1 s"});
      EXPECT_FALSE(c.recv(1, 5, &y, 1, errors[0]));
      hang.release();
      return;
    }
    c.setWaitLimit({60, "60 s"});
    CommGroup g{{1, 2}, r - 1};
    if (r == 2)
      hang.wait();
    EXPECT_FALSE(c.allReduce(g, ReduceOp::Sum, &x, &y, 1, errors[r]));
  });
  EXPECT_NE(errors[0].find("rank 0: recv f32(peer 1, tag 5, n 1): waited "), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("for rank 1, which waits for rank 2, which waits for no peer"),
            std::string::npos)
      << errors[0];
}

TEST(Communicator, RanksThatWaitForOneAnotherAreADeadlock) {
  float y[2] = {0, 0};
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    c.setWaitLimit({0.2, "0.2 s"});
    EXPECT_FALSE(c.recv(1 - r, 0, &y[r], 1, errors[r]));
  });
  // The first to run out of time says so; the other fails with its reason.
  for (const std::string &e : errors)
    EXPECT_NE(e.find("ranks {0, 1} wait for one another, so none can go on (a deadlock)"),
              std::string::npos)
        << e;
}

TEST(Communicator, DisagreeingRanksFail) {
  Floats x(8, 1.0f), y(8);
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(2, r);
    c.allReduce(g, ReduceOp::Sum, x.data(), y.data(), r == 0 ? 4 : 8, errors[r]);
  });
  for (const std::string &e : errors)
    EXPECT_NE(e.find("disagree about collective #0"), std::string::npos) << e;
}

TEST(Communicator, ReceiveChecksSizeAndPeer) {
  Floats x(6, 2.0f), y(6);
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    if (r == 0)
      c.send(1, 0, x.data(), 6, errors[0]);
    else
      c.recv(0, 0, y.data(), 4, errors[1]);
  });
  EXPECT_NE(errors[1].find("received 6 f32 elements"), std::string::npos) << errors[1];
  auto comms = LocalCommunicator::createWorld(2);
  std::string error;
  EXPECT_FALSE(comms[0]->send(0, 0, x.data(), 6, error));
  EXPECT_NE(error.find("the peer must be another rank"), std::string::npos) << error;
}

TEST(Communicator, ReceiveFromAStoppedRankFails) {
  float y = 0;
  std::string error;
  onRanks(2, [&](uint32_t r, Communicator &c) {
    if (r == 0)
      c.setRunning(false);
    else
      EXPECT_FALSE(c.recv(0, 3, &y, 1, error));
  });
  EXPECT_NE(error.find("rank 0 stopped without sending"), std::string::npos) << error;
}

TEST(Communicator, WaitForAnUnknownTicketFails) {
  auto comms = LocalCommunicator::createWorld(1);
  std::string error;
  EXPECT_FALSE(comms[0]->wait(3, error));
  EXPECT_NE(error.find("never started"), std::string::npos) << error;
}

TEST(Communicator, GroupMustHoldTheRank) {
  auto comms = LocalCommunicator::createWorld(2);
  CommGroup wrong{{1, 0}, 0}; // Index 0 is rank 1, not rank 0.
  float x = 1, y = 0;
  std::string error;
  EXPECT_FALSE(comms[0]->allReduce(wrong, ReduceOp::Sum, &x, &y, 1, error));
  EXPECT_NE(error.find("does not hold rank 0"), std::string::npos) << error;
}

} // namespace
