//===- RankThreads.cpp - A process's ranks as threads ---------------------===//

#include "runtime/host/RankThreads.h"

#include <cstdio>
#include <new>
#include <optional>

namespace tessel::rt {

RankThreads::RankThreads(std::vector<uint32_t> ranks, std::vector<Communicator *> comms,
                         std::function<void()> setUp, std::chrono::milliseconds stuckAfterAbort)
    : ranks_(std::move(ranks)), comms_(std::move(comms)), setUp_(std::move(setUp)),
      stuckAfterAbort_(stuckAfterAbort), errors_(comms_.size()), busy_(comms_.size(), false) {
  for (uint32_t r : ranks_)
    threads_.emplace_back([this, r] { serve(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread &t : threads_)
    t.join();
}

bool RankThreads::hasStuckRank() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stuck_;
}

void RankThreads::serve(uint32_t rank) {
  if (setUp_)
    setUp_();
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_ && generation_ == seen)
      return;
    seen = generation_;
    Work work = work_;
    lock.unlock();
    std::string error;
    bool ok = false;
    // An exception ends this rank's part with a message and releases every peer waiting on it.
    try {
      ok = work(rank, error);
    } catch (const std::bad_alloc &) {
      error = "out of memory";
      comms_[rank]->abort("rank " + std::to_string(rank) + ": " + error);
    } catch (const std::exception &e) {
      error = e.what();
      comms_[rank]->abort("rank " + std::to_string(rank) + ": " + error);
    }
    // A peer still waiting for this rank's part of a collective learns that it will not come.
    comms_[rank]->setRunning(false);
    lock.lock();
    errors_[rank] = ok ? std::string() : error;
    busy_[rank] = false;
    if (--pending_ == 0)
      done_.notify_all();
  }
}

bool RankThreads::run(const Work &work, std::string &error) {
  Communicator &first = *comms_[ranks_[0]];
  std::unique_lock<std::mutex> lock(mu_);
  if (stuck_) {
    error = "a rank of this run is hung";
    return false;
  }
  for (uint32_t r : ranks_)
    comms_[r]->setRunning(true);
  work_ = work;
  pending_ = static_cast<uint32_t>(ranks_.size());
  for (uint32_t r : ranks_)
    busy_[r] = true;
  ++generation_;
  start_.notify_all();
  // Once the communicator is aborted, every rank that waits for a peer returns at once.
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> abortedAt;
  while (!done_.wait_for(lock, std::chrono::milliseconds(50), [&] { return pending_ == 0; })) {
    if (!abortedAt && first.aborted())
      abortedAt = Clock::now();
    if (!abortedAt || Clock::now() - *abortedAt < stuckAfterAbort_)
      continue;
    stuck_ = true;
    std::vector<uint32_t> hung;
    for (uint32_t r : ranks_)
      if (busy_[r])
        hung.push_back(r);
    std::string reason;
    first.aborted(&reason);
    char waited[32];
    std::snprintf(waited, sizeof waited, "%.1f s",
                  std::chrono::duration<double>(stuckAfterAbort_).count());
    error = reason + "; " + describeRankSet(hung) + (hung.size() == 1 ? " has" : " have") +
            " not returned " + waited + " after the run was aborted";
    return false;
  }
  lock.unlock();
  // The first failure aborted the communicator with its reason; the other ranks' failures
  // followed from it.
  std::string reason;
  if (first.aborted(&reason)) {
    error = reason;
    return false;
  }
  for (uint32_t r : ranks_)
    if (!errors_[r].empty()) {
      error = "rank " + std::to_string(r) + ": " + errors_[r];
      return false;
    }
  return true;
}

} // namespace tessel::rt
