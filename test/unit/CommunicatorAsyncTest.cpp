//===- CommunicatorAsyncTest.cpp - When and where operations run ----------===//
//
// Async operations overlapping compute and completing in issue order whatever the order of the
// waits; a synchronous one running on the issuing thread when nothing is in flight, else after
// what is, on the worker; and after a failure, every later operation failing with its reason.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"

#include "test/unit/CommGroups.h"
#include "test/unit/CommunicatorTestSupport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace tessel::rt;

namespace {

using namespace tessel::test;

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
