//===- RankThreadsTest.cpp - A process's ranks as threads -----------------===//
//
// Jobs run on every rank at once; a failure is reported as the first one; and a rank hung
// where nothing reaches it (as in a kernel or an allocator) ends the run once its peers' wait
// limit runs out, instead of hanging the host.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/RankThreads.h"

#include "test/unit/CommGroups.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

using namespace tessel::rt;

namespace {

struct World {
  explicit World(uint32_t size) : comms(LocalCommunicator::createWorld(size)) {
    for (uint32_t r = 0; r < size; ++r) {
      ranks.push_back(r);
      pointers.push_back(comms[r].get());
    }
  }
  std::vector<std::unique_ptr<LocalCommunicator>> comms;
  std::vector<uint32_t> ranks;
  std::vector<Communicator *> pointers;
};

TEST(RankThreads, RunsEveryRankAtOnce) {
  World world(3);
  RankThreads threads(world.ranks, world.pointers, nullptr);
  std::vector<float> sums(3);
  std::string error;
  ASSERT_TRUE(threads.run(
      [&](uint32_t r, std::string &why) {
        CommGroup g = tessel::test::worldGroup(3, r);
        float x = static_cast<float>(r + 1);
        return world.comms[r]->allReduce(g, ReduceOp::Sum, &x, &sums[r], 1, why);
      },
      error))
      << error;
  EXPECT_EQ(sums, std::vector<float>(3, 6.0f));
  // A rank's own failure is reported with its rank.
  EXPECT_FALSE(threads.run(
      [](uint32_t r, std::string &why) {
        if (r == 1)
          why = "bad input";
        return r != 1;
      },
      error));
  EXPECT_EQ(error, "rank 1: bad input");
}

TEST(RankThreads, AHungRankEndsTheRunInsteadOfHangingIt) {
  World world(3);
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  RankThreads threads(world.ranks, world.pointers, nullptr, std::chrono::milliseconds(200));
  std::string error;
  const bool ok = threads.run(
      [&](uint32_t r, std::string &why) {
        if (r == 2) { // Hung until the test lets it go: no peer can reach it.
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return released; });
          return false;
        }
        world.comms[r]->setWaitLimit({0.2, "0.2 s"});
        CommGroup g = tessel::test::worldGroup(3, r);
        float x = 1, y = 0;
        return world.comms[r]->allReduce(g, ReduceOp::Sum, &x, &y, 1, why);
      },
      error);
  EXPECT_FALSE(ok);
  EXPECT_TRUE(threads.hasStuckRank());
  EXPECT_NE(error.find("for rank 2, which waits for no peer: it is hung"), std::string::npos)
      << error;
  EXPECT_NE(error.find("; rank 2 has not returned 0.2 s after the run was aborted"),
            std::string::npos)
      << error;
  EXPECT_FALSE(threads.run([](uint32_t, std::string &) { return true; }, error));
  EXPECT_EQ(error, "a rank of this run is hung");
  // Here the hang ends, so the threads can be joined.
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
}

} // namespace
