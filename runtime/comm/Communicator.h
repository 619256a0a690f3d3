//===- Communicator.h - Collectives between the ranks of a run --*- C++ -*-===//
//
// What the collective kernels of a plan call: all-reduce (sum, max), all-gather,
// reduce-scatter, all-to-all, broadcast and point-to-point transfers, over the groups the plan
// declares. Each rank hands its operations to one communication worker, which runs them in the
// order they were issued; so the k-th collective a rank issues on a group meets the k-th of
// every other member, and the rank's compute thread can go on while one is in flight (start,
// then wait).
//
// Results are deterministic: a sum adds the members' values in group-index order (the member
// at index 0 first), so every member gets the same bits and timing never changes them.
//
// A rank that fails aborts the communicator: every operation of every rank that is pending or
// issued later fails with that reason, so no rank waits forever for a peer that stopped.
// A rank that is alive but silent (a stopped process, a hung driver, a lost host) is caught
// by the wait limit: an operation that waits for its peers longer than the limit fails,
// naming the rank it waited for (followed through the ranks that wait in turn, to the one
// that waits for nobody), and the run ends.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_COMMUNICATOR_H
#define TESSEL_RUNTIME_COMM_COMMUNICATOR_H

#include "common/support/DType.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessel::rt {

/// A group as one of its members sees it.
struct CommGroup {
  std::vector<uint32_t> ranks; ///< World ranks, in group-index order.
  uint32_t index = 0;          ///< This rank's position in `ranks`.
  uint32_t size() const { return static_cast<uint32_t>(ranks.size()); }
};

enum class ReduceOp { Sum, Max };

/// One operation as a rank issues it. Sizes count elements of `type`. The operations other
/// than reductions move the bits, whatever the type. Reductions take float types only: they
/// widen each member's values to f32, combine them in f32 in group-index order and round the
/// result to `type` once, so a 16-bit reduction loses no more than its final rounding. `x` is
/// read and `y` written until the operation is done.
struct CommOp {
  enum class Kind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Send, Recv };
  Kind kind = Kind::AllReduce;
  planfile::DType type = planfile::DType::F32; ///< Of x and y.
  const CommGroup *group = nullptr;            ///< Collectives; must outlive the operation.
  ReduceOp reduce = ReduceOp::Sum;             ///< AllReduce.
  /// AllReduce, Broadcast, Send, Recv: elements of x and y.
  int64_t n = 0;
  /// AllGather: x [outer, chunk] -> y [outer, ways, chunk], y[o, r] = x of member r [o].
  /// ReduceScatter: x [outer, ways, chunk] -> y [outer, chunk], y[o] = sum over r of
  ///   x of member r [o, me].
  /// AllToAll: x [outer, ways, chunk] -> y [outer, ways, chunk], y[o, r] = x of r [o, me].
  /// `ways` is the group's size; y must not overlap x.
  int64_t outer = 0, chunk = 0;
  uint32_t root = 0; ///< Broadcast: the group index whose x every member's y receives.
  uint32_t peer = 0; ///< Send, Recv: the other world rank.
  int64_t tag = 0;   ///< Send, Recv: the k-th send from a to b with tag t meets b's k-th
                     ///< receive from a with tag t.
  const void *x = nullptr;
  void *y = nullptr;
};

/// A Send of `n` elements of `type` at `x` to world rank `peer` with `tag`; a Recv into `y`.
CommOp sendOp(uint32_t peer, int64_t tag, const void *x, int64_t n,
              planfile::DType type = planfile::DType::F32);
CommOp recvOp(uint32_t peer, int64_t tag, void *y, int64_t n,
              planfile::DType type = planfile::DType::F32);

/// The name of an operation kind, for messages.
const char *commKindName(CommOp::Kind kind);

/// Bytes of `n` elements of `op`'s type.
inline size_t commBytes(const CommOp &op, int64_t n) {
  return static_cast<size_t>(n) * planfile::dtypeBytes(op.type);
}

/// acc[i] = acc[i] (op) x[i] for i < n, x of `type` widened to f32: how every communicator
/// reduces, so that all give the same bits. Max keeps a NaN, so a non-finite value is never
/// reduced away.
void reduceInto(ReduceOp reduce, float *acc, const void *x, planfile::DType type, int64_t n);
/// to[i] = from[i] widened to f32 (exactly) for i < n.
void widenInto(float *to, const void *from, planfile::DType type, int64_t n);
/// to[i] = from[i] rounded to `type` (to nearest, ties to even) for i < n.
void narrowInto(void *to, planfile::DType type, const float *from, int64_t n);

/// How long one operation may wait for its peers; `origin` says what set it, for the
/// message of an operation that runs out of it ("--comm-timeout 20 s after the slowest step,
/// 0.3 s").
struct WaitLimit {
  double seconds = 0; ///< 0: no limit.
  std::string origin;
};

/// "{2, 5}".
std::string rankList(const std::vector<uint32_t> &ranks);
/// "rank 2" or "ranks {2, 5}".
std::string describeRankSet(const std::vector<uint32_t> &ranks);

/// Whom rank `me`, which ran out of time waiting for the ranks `direct`, waited for: the waits
/// followed to the first rank that waits for nobody ("rank 3, which waits for rank 2, which
/// " + `stuck`), or the ranks that wait for one another (a deadlock). `waitsFor(q)` is whom
/// rank q waits for, or null where it waits for no peer (or cannot say).
std::string explainWait(uint32_t me, const std::vector<uint32_t> &direct,
                        const std::function<const std::vector<uint32_t> *(uint32_t)> &waitsFor,
                        const std::string &stuck);

/// One rank's end of the communicator.
class Communicator {
public:
  using Ticket = uint64_t;
  using Clock = std::chrono::steady_clock;

  virtual ~Communicator() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t worldSize() const = 0;

  /// Issues `op` to this rank's communication worker and returns at once; operations run in
  /// the order they were started. Until it is done the caller must not write `x` or touch `y`.
  virtual Ticket start(const CommOp &op) = 0;
  /// Blocks until the operation of `ticket` is done; false with the reason if it failed (the
  /// communicator was aborted, or the members of a group disagree about the operation).
  virtual bool wait(Ticket ticket, std::string &error) = 0;

  /// Fails every pending and later operation of every rank; the first reason given is the one
  /// every failure reports.
  virtual void abort(const std::string &reason) = 0;
  /// Whether the communicator was aborted; if so, `reason` receives the reason.
  virtual bool aborted(std::string *reason = nullptr) const = 0;

  /// Sets how long each operation started from now on may wait for its peers. Past it, the
  /// operation fails, naming the ranks that did not come (and why, where the communicator can
  /// tell), and so does every later one: the run ends. Any thread may call it.
  void setWaitLimit(const WaitLimit &limit) {
    std::lock_guard<std::mutex> lock(limitMu_);
    limit_ = limit;
  }
  WaitLimit waitLimit() const {
    std::lock_guard<std::mutex> lock(limitMu_);
    return limit_;
  }
  /// When an operation starting now runs out of its limit (Clock's maximum without one).
  Clock::time_point deadlineFromNow() const;
  /// "waited 23.4 s (the limit: ORIGIN)": how a timed-out operation says how long it waited.
  std::string describeWait(Clock::time_point started) const;

  /// Marks whether this rank is running a program. A collective or receive that waits for a
  /// rank that is not running can never complete: it aborts the communicator instead of
  /// hanging. Ranks start out running.
  virtual void setRunning(bool running) = 0;

  /// Communicators that enqueue their operations on a GPU stream (NCCL): orders the operations
  /// started from now on after the work queued so far on `stream` (the issuing kernel's
  /// cudaStream_t), without waiting on the host, and returns true. The others return false:
  /// their operations read memory as they find it, so the issuing kernel must first wait for
  /// what writes it.
  virtual bool orderAfter(void * /*stream*/) { return false; }

  /// start + wait: the operation in its turn after those started before it.
  virtual bool run(const CommOp &op, std::string &error) { return wait(start(op), error); }
  /// Point-to-point operations (Send, Recv) in flight together, in their turn after those
  /// started before: done when every one of them is. A send over NCCL, or MPI's synchronous
  /// send, is done only once its receive runs, so two ranks that each send to the other before
  /// receiving would wait forever if they took their operations one at a time (a pipeline's
  /// exchanges, common/schedule/Schedule.h). startExchange issues them and returns at once, as start
  /// does; exchange waits for them too.
  virtual Ticket startExchange(const std::vector<CommOp> &ops) = 0;
  virtual bool exchange(const std::vector<CommOp> &ops, std::string &error) {
    return wait(startExchange(ops), error);
  }
  bool allReduce(const CommGroup &group, ReduceOp reduce, const float *x, float *y, int64_t n,
                 std::string &error);
  bool allGather(const CommGroup &group, const void *x, void *y, int64_t outer, int64_t chunk,
                 std::string &error);
  bool reduceScatter(const CommGroup &group, const float *x, float *y, int64_t outer, int64_t chunk,
                     std::string &error);
  bool allToAll(const CommGroup &group, const void *x, void *y, int64_t outer, int64_t chunk,
                std::string &error);
  bool broadcast(const CommGroup &group, uint32_t root, const void *x, void *y, int64_t n,
                 std::string &error);
  bool send(uint32_t peer, int64_t tag, const void *x, int64_t n, std::string &error,
            planfile::DType type = planfile::DType::F32);
  bool recv(uint32_t peer, int64_t tag, void *y, int64_t n, std::string &error,
            planfile::DType type = planfile::DType::F32);

private:
  mutable std::mutex limitMu_;
  WaitLimit limit_;
};

/// A communicator whose operations run on one worker thread per rank, in the order they were
/// started; an implementation says how one operation runs (`execute`). Once an operation
/// fails, it and every later one report that failure. One thread issues a rank's operations.
class QueuedCommunicator : public Communicator {
public:
  ~QueuedCommunicator() override;
  Ticket start(const CommOp &op) final;
  bool wait(Ticket ticket, std::string &error) final;
  /// With nothing in flight, runs `op` on the calling thread: handing it to the idle worker
  /// and waiting to be woken by it would only add two thread switches.
  bool run(const CommOp &op, std::string &error) final;
  /// The operations as one item of the queue (executeExchange), the same ways.
  Ticket startExchange(const std::vector<CommOp> &ops) final;
  bool exchange(const std::vector<CommOp> &ops, std::string &error) final;

protected:
  QueuedCommunicator();
  /// Starts the worker; the last thing a derived constructor does.
  void startWorker();
  /// Lets the worker finish what is queued and stops it; the first thing a derived destructor
  /// does. Operations still queued may wait for peers that never come, so they abort the
  /// communicator first.
  void stopWorker();
  /// Runs one operation, on the worker thread or in run() on the issuing thread, never both
  /// at once; false with the reason if it failed.
  virtual bool execute(const CommOp &op, std::string &error) = 0;
  /// Runs an exchange's operations, the same way; in order unless overridden.
  virtual bool executeExchange(const std::vector<CommOp> &ops, std::string &error);

private:
  struct Worker;
  /// What the worker runs at a time: one operation, or an exchange's.
  struct Item {
    std::vector<CommOp> ops;
    bool exchange = false;
  };
  /// Queues `item` behind what is in flight, or runs it here when nothing is; waits for it.
  bool runItem(Item item, std::string &error);
  bool executeItem(const Item &item, std::string &error);
  std::unique_ptr<Worker> worker_;
};

class CommMemory;

/// The ranks of a run as threads of one process: operations copy between the members'
/// buffers directly, through each member's CommMemory (host memory, or a GPU's). Sends are
/// buffered, so a send never waits for its receive.
class LocalCommunicator : public QueuedCommunicator {
public:
  /// One communicator per rank of a world of `size` ranks; each owns its worker thread.
  /// `memories[r]` is where rank r's buffers are (it must outlive the communicators); host
  /// memory for every rank where none are given.
  static std::vector<std::unique_ptr<LocalCommunicator>>
  createWorld(uint32_t size, const std::vector<CommMemory *> &memories = {});
  ~LocalCommunicator() override;

  uint32_t rank() const override { return rank_; }
  uint32_t worldSize() const override;
  void abort(const std::string &reason) override;
  bool aborted(std::string *reason = nullptr) const override;
  void setRunning(bool running) override;

  struct World;

private:
  LocalCommunicator(std::shared_ptr<World> world, uint32_t rank);
  bool execute(const CommOp &op, std::string &error) override;

  std::shared_ptr<World> world_;
  uint32_t rank_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_COMM_COMMUNICATOR_H
