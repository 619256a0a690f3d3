//===- CommunicatorTest.cpp - Collectives between ranks as threads --------===//
//
// Every operation on 1 to 4 ranks against a serial reference (sums in group-index order, so
// the results must match bit for bit), on the whole world and on subgroups at once; async
// operations overlapping compute; a synchronous one running on the issuing thread when
// nothing is in flight, else after what is; an abort, a rank that stops, and ranks that
// disagree, each failing every waiting rank with the reason instead of hanging.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "test/unit/CommGroups.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace tessel::rt;

namespace {

using Floats = std::vector<float>;

using tessel::test::onRanks;
using tessel::test::worldGroup;

/// Values for a collective's buffers, the same for the same seed.
Floats randomFloats(size_t n, uint32_t seed) {
  return tessel::test::randomFloats(n, -3.0f, 3.0f, seed);
}

/// Bitwise equality of float vectors, naming the first difference.
void expectSameBits(const Floats &got, const Floats &want, const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
        << what << ": element " << i << " is " << got[i] << ", want " << want[i];
}

class Collectives : public ::testing::TestWithParam<uint32_t> {};

TEST_P(Collectives, AllReduceSumsInGroupOrder) {
  const uint32_t size = GetParam();
  const int64_t n = 1003; // Not a multiple of the slices the members sum.
  std::vector<Floats> x(size);
  for (uint32_t r = 0; r < size; ++r)
    x[r] = randomFloats(n, 10 + r);
  Floats want = x[0];
  for (uint32_t r = 1; r < size; ++r)
    for (int64_t j = 0; j < n; ++j)
      want[j] += x[r][j];
  std::vector<Floats> y(size, Floats(n));
  std::vector<std::string> errors(size);
  onRanks(size, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(size, r);
    if (!c.allReduce(g, ReduceOp::Sum, x[r].data(), y[r].data(), n, errors[r]))
      return;
    // In place, the same again.
    c.allReduce(g, ReduceOp::Sum, x[r].data(), x[r].data(), n, errors[r]);
  });
  for (uint32_t r = 0; r < size; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    expectSameBits(y[r], want, "rank " + std::to_string(r));
    expectSameBits(x[r], want, "rank " + std::to_string(r) + " in place");
  }
}

TEST_P(Collectives, AllReduceMax) {
  const uint32_t size = GetParam();
  const int64_t n = 257;
  std::vector<Floats> x(size), y(size, Floats(n));
  for (uint32_t r = 0; r < size; ++r)
    x[r] = randomFloats(n, 20 + r);
  std::vector<std::string> errors(size);
  onRanks(size, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(size, r);
    c.allReduce(g, ReduceOp::Max, x[r].data(), y[r].data(), n, errors[r]);
  });
  for (uint32_t r = 0; r < size; ++r) {
    ASSERT_EQ(errors[r], "");
    for (int64_t j = 0; j < n; ++j) {
      float m = x[0][j];
      for (uint32_t q = 1; q < size; ++q)
        m = std::max(m, x[q][j]);
      ASSERT_EQ(y[r][j], m) << "rank " << r << " element " << j;
    }
  }
}

TEST_P(Collectives, AllGatherReduceScatterAllToAll) {
  const uint32_t ways = GetParam();
  const int64_t outer = 3, chunk = 5;
  // gather: x [outer, chunk]; scatter and all-to-all: x [outer, ways, chunk].
  std::vector<Floats> small(ways), big(ways);
  for (uint32_t r = 0; r < ways; ++r) {
    small[r] = randomFloats(outer * chunk, 30 + r);
    big[r] = randomFloats(outer * ways * chunk, 40 + r);
  }
  std::vector<Floats> gathered(ways, Floats(outer * ways * chunk)),
      scattered(ways, Floats(outer * chunk)), exchanged(ways, Floats(outer * ways * chunk));
  std::vector<std::string> errors(ways);
  onRanks(ways, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(ways, r);
    c.allGather(g, small[r].data(), gathered[r].data(), outer, chunk, errors[r]) &&
        c.reduceScatter(g, big[r].data(), scattered[r].data(), outer, chunk, errors[r]) &&
        c.allToAll(g, big[r].data(), exchanged[r].data(), outer, chunk, errors[r]);
  });
  for (uint32_t me = 0; me < ways; ++me) {
    ASSERT_EQ(errors[me], "") << "rank " << me;
    Floats wantGather(outer * ways * chunk), wantScatter(outer * chunk),
        wantExchange(outer * ways * chunk);
    for (int64_t o = 0; o < outer; ++o)
      for (uint32_t r = 0; r < ways; ++r)
        for (int64_t j = 0; j < chunk; ++j) {
          wantGather[(o * ways + r) * chunk + j] = small[r][o * chunk + j];
          wantExchange[(o * ways + r) * chunk + j] = big[r][(o * ways + me) * chunk + j];
        }
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < chunk; ++j) {
        float sum = big[0][(o * ways + me) * chunk + j];
        for (uint32_t r = 1; r < ways; ++r)
          sum += big[r][(o * ways + me) * chunk + j];
        wantScatter[o * chunk + j] = sum;
      }
    std::string who = "rank " + std::to_string(me);
    expectSameBits(gathered[me], wantGather, who + " all_gather");
    expectSameBits(scattered[me], wantScatter, who + " reduce_scatter");
    expectSameBits(exchanged[me], wantExchange, who + " all_to_all");
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const uint32_t size = GetParam();
  const int64_t n = 77;
  for (uint32_t root = 0; root < size; ++root) {
    std::vector<Floats> x(size), y(size, Floats(n));
    for (uint32_t r = 0; r < size; ++r)
      x[r] = randomFloats(n, 50 + r);
    std::vector<std::string> errors(size);
    onRanks(size, [&](uint32_t r, Communicator &c) {
      CommGroup g = worldGroup(size, r);
      // The root broadcasts in place; the others receive into y.
      void *out = r == root ? static_cast<void *>(x[r].data()) : y[r].data();
      c.broadcast(g, root, x[r].data(), out, n, errors[r]);
    });
    for (uint32_t r = 0; r < size; ++r) {
      ASSERT_EQ(errors[r], "");
      expectSameBits(r == root ? x[r] : y[r], x[root], "root " + std::to_string(root));
    }
  }
}

TEST_P(Collectives, SameBitsEveryRun) {
  const uint32_t size = GetParam();
  const int64_t n = 4096;
  std::vector<Floats> x(size);
  for (uint32_t r = 0; r < size; ++r)
    x[r] = randomFloats(n, 60 + r);
  Floats first;
  for (int run = 0; run < 5; ++run) {
    std::vector<Floats> y(size, Floats(n));
    onRanks(size, [&](uint32_t r, Communicator &c) {
      CommGroup g = worldGroup(size, r);
      std::string error;
      // Ranks arrive in a different order every run.
      std::this_thread::sleep_for(std::chrono::microseconds(((r + run) % size) * 300));
      EXPECT_TRUE(c.allReduce(g, ReduceOp::Sum, x[r].data(), y[r].data(), n, error)) << error;
    });
    for (uint32_t r = 1; r < size; ++r)
      expectSameBits(y[r], y[0], "rank " + std::to_string(r) + " of run " + std::to_string(run));
    if (run == 0)
      first = y[0];
    else
      expectSameBits(y[0], first, "run " + std::to_string(run));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1u, 2u, 3u, 4u));

TEST(Communicator, SubgroupsRunAtOnce) {
  // A mesh {dp = 2, tp = 2}: rank = dp * 2 + tp. Each rank sums over its tp pair, then its dp
  // pair; the two instances of each name run concurrently.
  const int64_t n = 64;
  std::vector<Floats> x(4), y(4, Floats(n)), z(4, Floats(n));
  for (uint32_t r = 0; r < 4; ++r)
    x[r] = randomFloats(n, 70 + r);
  std::vector<std::string> errors(4);
  onRanks(4, [&](uint32_t r, Communicator &c) {
    CommGroup tp{{r / 2 * 2, r / 2 * 2 + 1}, r % 2};
    CommGroup dp{{r % 2, r % 2 + 2}, r / 2};
    c.allReduce(tp, ReduceOp::Sum, x[r].data(), y[r].data(), n, errors[r]) &&
        c.allReduce(dp, ReduceOp::Sum, y[r].data(), z[r].data(), n, errors[r]);
  });
  for (uint32_t r = 0; r < 4; ++r) {
    ASSERT_EQ(errors[r], "");
    for (int64_t j = 0; j < n; ++j) {
      float tp0 = x[0][j] + x[1][j], tp1 = x[2][j] + x[3][j];
      ASSERT_EQ(z[r][j], tp0 + tp1) << "rank " << r;
      ASSERT_EQ(y[r][j], r < 2 ? tp0 : tp1);
    }
  }
}

TEST(Communicator, AsyncCollectiveOverlapsCompute) {
  // Rank 1 joins the all-reduce only after rank 0 has computed past its start: rank 0's start
  // must return at once. A bounded wait turns a regression into a failure, not a hang.
  const int64_t n = 32;
  std::vector<Floats> x = {randomFloats(n, 1), randomFloats(n, 2)}, y(2, Floats(n));
  std::mutex mu;
  std::condition_variable cv;
  bool computed = false;
  double work = 0;
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(2, r);
    CommOp op;
    op.kind = CommOp::Kind::AllReduce;
    op.group = &g;
    op.n = n;
    op.x = x[r].data();
    op.y = y[r].data();
    if (r == 0) {
      Communicator::Ticket t = c.start(op);
      for (int i = 1; i <= 1000; ++i) // The compute that overlaps the collective.
        work += 1.0 / i;
      {
        std::lock_guard<std::mutex> lock(mu);
        computed = true;
      }
      cv.notify_all();
      c.wait(t, errors[0]);
    } else {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return computed; })) {
        errors[1] = "rank 0 did not compute while its all-reduce was in flight";
        c.abort(errors[1]);
        return;
      }
      lock.unlock();
      c.run(op, errors[1]);
    }
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_GT(work, 7.0);
  for (int64_t j = 0; j < n; ++j)
    ASSERT_EQ(y[0][j], x[0][j] + x[1][j]);
  expectSameBits(y[1], y[0], "rank 1");
}

TEST(Communicator, OperationsRunInIssueOrder) {
  // Three async all-reduces on one rank, waited in reverse: each result is its own.
  const int64_t n = 8;
  std::vector<std::vector<Floats>> x(2), y(2);
  for (uint32_t r = 0; r < 2; ++r)
    for (int k = 0; k < 3; ++k) {
      x[r].push_back(randomFloats(n, 100 + 10 * r + k));
      y[r].push_back(Floats(n));
    }
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    CommGroup g = worldGroup(2, r);
    std::vector<Communicator::Ticket> tickets;
    for (int k = 0; k < 3; ++k) {
      CommOp op;
      op.kind = CommOp::Kind::AllReduce;
      op.group = &g;
      op.n = n;
      op.x = x[r][k].data();
      op.y = y[r][k].data();
      tickets.push_back(c.start(op));
    }
    for (int k = 2; k >= 0; --k)
      if (!c.wait(tickets[k], errors[r]))
        return;
  });
  for (uint32_t r = 0; r < 2; ++r) {
    ASSERT_EQ(errors[r], "");
    for (int k = 0; k < 3; ++k)
      for (int64_t j = 0; j < n; ++j)
        ASSERT_EQ(y[r][k][j], x[0][k][j] + x[1][k][j]);
  }
}

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
  EXPECT_NE(errors[2].find("the communicator was aborted: rank "), std::string::npos)
      << errors[2];
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

TEST(Communicator, SendReceivePairs) {
  // A ring: each rank sends two tagged messages to the next and receives the previous rank's,
  // the tags in the opposite order. Sends are buffered, so all ranks send first.
  const uint32_t size = 3;
  const int64_t n = 10;
  std::vector<Floats> a(size), b(size), gotA(size, Floats(n)), gotB(size, Floats(n));
  for (uint32_t r = 0; r < size; ++r) {
    a[r] = randomFloats(n, 80 + r);
    b[r] = randomFloats(n, 90 + r);
  }
  std::vector<std::string> errors(size);
  onRanks(size, [&](uint32_t r, Communicator &c) {
    uint32_t next = (r + 1) % size, prev = (r + size - 1) % size;
    c.send(next, 1, a[r].data(), n, errors[r]) && c.send(next, 2, b[r].data(), n, errors[r]) &&
        c.recv(prev, 2, gotB[r].data(), n, errors[r]) &&
        c.recv(prev, 1, gotA[r].data(), n, errors[r]);
  });
  for (uint32_t r = 0; r < size; ++r) {
    ASSERT_EQ(errors[r], "");
    uint32_t prev = (r + size - 1) % size;
    expectSameBits(gotA[r], a[prev], "tag 1 at rank " + std::to_string(r));
    expectSameBits(gotB[r], b[prev], "tag 2 at rank " + std::to_string(r));
  }
}

TEST(Communicator, MessagesOfOneTagArriveInOrder) {
  const int64_t n = 4;
  std::vector<Floats> sent;
  for (int k = 0; k < 5; ++k)
    sent.push_back(randomFloats(n, 200 + k));
  std::vector<Floats> got(5, Floats(n));
  std::string errors[2];
  onRanks(2, [&](uint32_t r, Communicator &c) {
    for (int k = 0; k < 5; ++k)
      if (r == 0 ? !c.send(1, 7, sent[k].data(), n, errors[0])
                 : !c.recv(0, 7, got[k].data(), n, errors[1]))
        return;
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (int k = 0; k < 5; ++k)
    expectSameBits(got[k], sent[k], "message " + std::to_string(k));
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

/// Records which thread ran each operation (by tag); the operation tagged `hold` waits until
/// release() before it ends, and the one tagged `fail` fails.
class RecordingCommunicator final : public QueuedCommunicator {
public:
  RecordingCommunicator() { startWorker(); }
  ~RecordingCommunicator() override { stopWorker(); }
  uint32_t rank() const override { return 0; }
  uint32_t worldSize() const override { return 1; }
  void abort(const std::string &) override {}
  bool aborted(std::string *) const override { return false; }
  void setRunning(bool) override {}

  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<std::pair<int64_t, std::thread::id>> ran() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }

  static constexpr int64_t hold = 100, fail = 200;

private:
  bool execute(const CommOp &op, std::string &error) override {
    std::unique_lock<std::mutex> lock(mu_);
    ran_.emplace_back(op.tag, std::this_thread::get_id());
    if (op.tag == hold && !cv_.wait_for(lock, std::chrono::seconds(20), [&] { return released_; }))
      return false;
    if (op.tag == fail)
      error = "operation " + std::to_string(op.tag) + " failed";
    return op.tag != fail;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<std::pair<int64_t, std::thread::id>> ran_;
};

CommOp tagged(int64_t tag) {
  CommOp op;
  op.kind = CommOp::Kind::Send;
  op.tag = tag;
  return op;
}

TEST(Communicator, SynchronousOperationRunsOnTheIssuingThreadWhenNothingIsInFlight) {
  RecordingCommunicator c;
  std::string error;
  ASSERT_TRUE(c.run(tagged(1), error)) << error;
  // Behind an operation in flight, one waited for at once still runs after it, on the worker.
  Communicator::Ticket held = c.start(tagged(RecordingCommunicator::hold));
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200)); // run(2) is queued by then.
    c.release();
  });
  ASSERT_TRUE(c.run(tagged(2), error)) << error;
  releaser.join();
  ASSERT_TRUE(c.wait(held, error)) << error;
  ASSERT_TRUE(c.run(tagged(3), error)) << error;
  auto ran = c.ran();
  ASSERT_EQ(ran.size(), 4u);
  const std::thread::id self = std::this_thread::get_id();
  EXPECT_EQ(ran[0], std::make_pair(int64_t{1}, self));
  EXPECT_EQ(ran[1].first, RecordingCommunicator::hold);
  EXPECT_NE(ran[1].second, self);
  EXPECT_EQ(ran[2], std::make_pair(int64_t{2}, ran[1].second));
  EXPECT_EQ(ran[3], std::make_pair(int64_t{3}, self));
}

TEST(Communicator, AfterAFailureEveryOperationReportsIt) {
  // On the issuing thread as on the worker: the first failure is every later one's reason.
  RecordingCommunicator c;
  std::string error, later, queued;
  EXPECT_FALSE(c.run(tagged(RecordingCommunicator::fail), error));
  EXPECT_EQ(error, "operation 200 failed");
  EXPECT_FALSE(c.run(tagged(1), later));
  EXPECT_EQ(later, error);
  EXPECT_FALSE(c.wait(c.start(tagged(2)), queued));
  EXPECT_EQ(queued, error);
  EXPECT_EQ(c.ran().size(), 2u); // The worker runs what was queued; run() adds nothing.
}

} // namespace
