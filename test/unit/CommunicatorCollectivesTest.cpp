//===- CommunicatorCollectivesTest.cpp - Collectives and messages ---------===//
//
// Every collective on 1 to 4 ranks against a serial reference (sums in group-index order, so the
// results must match bit for bit, run after run), on the whole world and on subgroups at once;
// messages between pairs of ranks, by tag and in order.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "test/unit/CommGroups.h"
#include "test/unit/CommunicatorTestSupport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace tessel::rt;

namespace {

using namespace tessel::test;

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

} // namespace
