//===- RankThreads.h - A process's ranks as threads -------------*- C++ -*-===//
//
// Where a process runs several ranks, each is a thread that lives as long as the run; the
// host hands them one job at a time (a program, a pipeline step), which they run all at once,
// and waits for every one. A rank that fails aborts the communicator, so the others, waiting
// for it, fail too and return. A rank that is hung where nothing can reach it (in a kernel, in
// an allocator) never returns: once the communicator is aborted (by a peer's wait limit, see
// Communicator.h), the host waits a little longer and then gives it up, so the run ends with
// a message instead of hanging.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_RANKTHREADS_H
#define TESSEL_RUNTIME_HOST_RANKTHREADS_H

#include "runtime/comm/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessel::rt {

class RankThreads {
public:
  using Work = std::function<bool(uint32_t rank, std::string &error)>;

  /// One thread for each of `ranks`, which first runs `setUp` (e.g. to size its compute
  /// pool); `comms[r]` is world rank r's communicator, which must outlive the threads.
  /// `stuckAfterAbort`: how long a rank may take to return once the communicator is aborted.
  RankThreads(std::vector<uint32_t> ranks, std::vector<Communicator *> comms,
              std::function<void()> setUp,
              std::chrono::milliseconds stuckAfterAbort = std::chrono::seconds(5));
  /// Joins the threads. Where a rank is stuck its thread may never end: the owner must then
  /// leave this object (and whatever the thread uses) to the end of the process instead.
  ~RankThreads();
  RankThreads(const RankThreads &) = delete;
  RankThreads &operator=(const RankThreads &) = delete;

  /// Runs `work` on every rank at once and waits for all; false with the first failure's
  /// reason (the communicator's abort reason, else "rank R: ..."). A rank that does not return
  /// `stuckAfterAbort` after the abort is given up: false, naming it, and every later run
  /// fails at once.
  bool run(const Work &work, std::string &error);
  /// Whether a rank was given up (see run).
  bool hasStuckRank() const;

private:
  void serve(uint32_t rank);

  const std::vector<uint32_t> ranks_;
  const std::vector<Communicator *> comms_;
  const std::function<void()> setUp_;
  const std::chrono::milliseconds stuckAfterAbort_;

  mutable std::mutex mu_;
  std::condition_variable start_, done_;
  Work work_;
  uint64_t generation_ = 0;
  uint32_t pending_ = 0;
  bool stopping_ = false, stuck_ = false;
  std::vector<std::string> errors_; ///< Per world rank: its last job's failure, or "".
  std::vector<bool> busy_;          ///< Per world rank: running its part of the current job.
  std::vector<std::thread> threads_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_RANKTHREADS_H
