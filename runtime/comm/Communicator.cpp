//===- Communicator.cpp - The synchronous forms of the operations ---------===//

#include "runtime/comm/Communicator.h"
#include "runtime/comm/CommMemory.h"

#include "common/support/Float16.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace tessel::rt {

const char *commKindName(CommOp::Kind kind) {
  switch (kind) {
  case CommOp::Kind::AllReduce:
    return "all_reduce";
  case CommOp::Kind::AllGather:
    return "all_gather";
  case CommOp::Kind::ReduceScatter:
    return "reduce_scatter";
  case CommOp::Kind::AllToAll:
    return "all_to_all";
  case CommOp::Kind::Broadcast:
    return "broadcast";
  case CommOp::Kind::Send:
    return "send";
  case CommOp::Kind::Recv:
    return "recv";
  }
  return "?";
}

std::string rankList(const std::vector<uint32_t> &ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "}";
}

std::string describeRankSet(const std::vector<uint32_t> &ranks) {
  return ranks.size() == 1 ? "rank " + std::to_string(ranks[0]) : "ranks " + rankList(ranks);
}

std::string explainWait(uint32_t me, const std::vector<uint32_t> &direct,
                        const std::function<const std::vector<uint32_t> *(uint32_t)> &waitsFor,
                        const std::string &stuck) {
  // Breadth first, so the way to the culprit is a shortest one.
  std::map<uint32_t, uint32_t> reachedFrom; // rank -> the waiting rank that led to it
  std::vector<uint32_t> frontier = direct, waiting{me};
  std::set<uint32_t> seen(direct.begin(), direct.end());
  seen.insert(me);
  int culprit = -1;
  for (size_t i = 0; i < frontier.size(); ++i) {
    const uint32_t q = frontier[i];
    const std::vector<uint32_t> *next = waitsFor(q);
    if (!next) {
      culprit = static_cast<int>(q);
      break;
    }
    waiting.push_back(q);
    for (uint32_t r : *next)
      if (seen.insert(r).second) {
        reachedFrom[r] = q;
        frontier.push_back(r);
      }
  }
  if (culprit < 0) {
    std::sort(waiting.begin(), waiting.end());
    return describeRankSet(direct) + "; " + describeRankSet(waiting) +
           " wait for one another, so none can go on (a deadlock)";
  }
  std::vector<uint32_t> path{static_cast<uint32_t>(culprit)};
  while (reachedFrom.count(path.back()))
    path.push_back(reachedFrom.at(path.back()));
  std::reverse(path.begin(), path.end());
  std::string chain = "rank " + std::to_string(path[0]);
  for (size_t i = 1; i < path.size(); ++i)
    chain += ", which waits for rank " + std::to_string(path[i]);
  chain += ", which " + stuck;
  return direct.size() == 1 ? chain : describeRankSet(direct) + " (" + chain + ")";
}

Communicator::Clock::time_point Communicator::deadlineFromNow() const {
  const double seconds = waitLimit().seconds;
  if (!(seconds > 0) || seconds > 1e9)
    return Clock::time_point::max();
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string Communicator::describeWait(Clock::time_point started) const {
  const WaitLimit limit = waitLimit();
  char text[64];
  std::snprintf(text, sizeof text, "waited %.1f s",
                std::chrono::duration<double>(Clock::now() - started).count());
  std::string s = text;
  if (!limit.origin.empty())
    s += " (the limit: " + limit.origin + ")";
  return s;
}

namespace {

/// Element i of `x`, of `type`, widened to f32.
template <planfile::DType T> float elementAt(const void *x, int64_t i) {
  if constexpr (T == planfile::DType::BF16)
    return bf16ToFloat(static_cast<const uint16_t *>(x)[i]);
  else if constexpr (T == planfile::DType::F16)
    return halfToFloat(static_cast<const uint16_t *>(x)[i]);
  else
    return static_cast<const float *>(x)[i];
}

template <planfile::DType T>
void reduceTyped(ReduceOp reduce, float *acc, const void *x, int64_t n) {
  if (reduce == ReduceOp::Sum) {
    for (int64_t i = 0; i < n; ++i)
      acc[i] += elementAt<T>(x, i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = elementAt<T>(x, i);
    acc[i] = acc[i] != acc[i] || v > acc[i] ? v : acc[i];
  }
}

} // namespace

void reduceInto(ReduceOp reduce, float *acc, const void *x, planfile::DType type, int64_t n) {
  switch (type) {
  case planfile::DType::BF16:
    return reduceTyped<planfile::DType::BF16>(reduce, acc, x, n);
  case planfile::DType::F16:
    return reduceTyped<planfile::DType::F16>(reduce, acc, x, n);
  default:
    return reduceTyped<planfile::DType::F32>(reduce, acc, x, n);
  }
}

void widenInto(float *to, const void *from, planfile::DType type, int64_t n) {
  if (n <= 0)
    return;
  if (type == planfile::DType::BF16 || type == planfile::DType::F16) {
    const uint16_t *h = static_cast<const uint16_t *>(from);
    for (int64_t i = 0; i < n; ++i)
      to[i] = type == planfile::DType::BF16 ? bf16ToFloat(h[i]) : halfToFloat(h[i]);
  } else if (to != from) {
    std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float));
  }
}

void narrowInto(void *to, planfile::DType type, const float *from, int64_t n) {
  if (n <= 0)
    return;
  if (type == planfile::DType::BF16 || type == planfile::DType::F16) {
    uint16_t *h = static_cast<uint16_t *>(to);
    for (int64_t i = 0; i < n; ++i)
      h[i] = type == planfile::DType::BF16 ? floatToBf16(from[i]) : floatToHalf(from[i]);
  } else if (to != from) {
    std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float));
  }
}

namespace {

class HostMemory final : public CommMemory {
public:
  void copy(void *to, const void *from, size_t bytes) override {
    if (bytes > 0 && to != from)
      std::memcpy(to, from, bytes);
  }
  void reduce(ReduceOp op, float *acc, const void *x, planfile::DType type, int64_t n) override {
    reduceInto(op, acc, x, type, n);
  }
  void widen(float *to, const void *from, planfile::DType type, int64_t n) override {
    widenInto(to, from, type, n);
  }
  void narrow(void *to, planfile::DType type, const float *from, int64_t n) override {
    narrowInto(to, type, from, n);
  }
  std::shared_ptr<void> allocate(size_t bytes) override {
    void *p = std::malloc(bytes ? bytes : 1);
    if (!p)
      return nullptr;
    return std::shared_ptr<void>(p, [](void *q) { std::free(q); });
  }
  bool finish(std::string &) override { return true; }
};

} // namespace

CommMemory &hostMemory() {
  static HostMemory memory;
  return memory;
}

bool Communicator::allReduce(const CommGroup &group, ReduceOp reduce, const float *x, float *y,
                             int64_t n, std::string &error) {
  CommOp op;
  op.kind = CommOp::Kind::AllReduce;
  op.group = &group;
  op.reduce = reduce;
  op.n = n;
  op.x = x;
  op.y = y;
  return run(op, error);
}

namespace {

CommOp blocks(CommOp::Kind kind, const CommGroup &group, const void *x, void *y, int64_t outer,
              int64_t chunk) {
  CommOp op;
  op.kind = kind;
  op.group = &group;
  op.outer = outer;
  op.chunk = chunk;
  op.x = x;
  op.y = y;
  return op;
}

} // namespace

bool Communicator::allGather(const CommGroup &group, const void *x, void *y, int64_t outer,
                             int64_t chunk, std::string &error) {
  return run(blocks(CommOp::Kind::AllGather, group, x, y, outer, chunk), error);
}

bool Communicator::reduceScatter(const CommGroup &group, const float *x, float *y, int64_t outer,
                                 int64_t chunk, std::string &error) {
  return run(blocks(CommOp::Kind::ReduceScatter, group, x, y, outer, chunk), error);
}

bool Communicator::allToAll(const CommGroup &group, const void *x, void *y, int64_t outer,
                            int64_t chunk, std::string &error) {
  return run(blocks(CommOp::Kind::AllToAll, group, x, y, outer, chunk), error);
}

bool Communicator::broadcast(const CommGroup &group, uint32_t root, const void *x, void *y,
                             int64_t n, std::string &error) {
  CommOp op;
  op.kind = CommOp::Kind::Broadcast;
  op.group = &group;
  op.root = root;
  op.n = n;
  op.x = x;
  op.y = y;
  return run(op, error);
}

CommOp sendOp(uint32_t peer, int64_t tag, const void *x, int64_t n, planfile::DType type) {
  CommOp op;
  op.kind = CommOp::Kind::Send;
  op.type = type;
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.x = x;
  return op;
}

CommOp recvOp(uint32_t peer, int64_t tag, void *y, int64_t n, planfile::DType type) {
  CommOp op;
  op.kind = CommOp::Kind::Recv;
  op.type = type;
  op.peer = peer;
  op.tag = tag;
  op.n = n;
  op.y = y;
  return op;
}

bool Communicator::send(uint32_t peer, int64_t tag, const void *x, int64_t n, std::string &error,
                        planfile::DType type) {
  return run(sendOp(peer, tag, x, n, type), error);
}

bool Communicator::recv(uint32_t peer, int64_t tag, void *y, int64_t n, std::string &error,
                        planfile::DType type) {
  return run(recvOp(peer, tag, y, n, type), error);
}

//===----------------------------------------------------------------------===//
// The worker that runs one rank's operations in order
//===----------------------------------------------------------------------===//

struct QueuedCommunicator::Worker {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;
  Ticket issued = 0, completed = 0;
  Ticket firstFailed = 0; ///< 0 while none failed; from it on, every operation fails.
  std::string failure;
  bool stopping = false;
  std::thread thread;
};

QueuedCommunicator::QueuedCommunicator() : worker_(std::make_unique<Worker>()) {}

QueuedCommunicator::~QueuedCommunicator() = default;

void QueuedCommunicator::startWorker() {
  worker_->thread = std::thread([this] {
    Worker &w = *worker_;
    std::unique_lock<std::mutex> lock(w.mu);
    for (;;) {
      w.cv.wait(lock, [&] { return w.stopping || !w.queue.empty(); });
      if (w.queue.empty())
        return;
      Item item = w.queue.front();
      lock.unlock();
      std::string error;
      bool ok = executeItem(item, error);
      lock.lock();
      w.queue.pop_front();
      ++w.completed;
      if (!ok && w.firstFailed == 0) {
        w.firstFailed = w.completed;
        w.failure = error;
      }
      w.cv.notify_all();
    }
  });
}

void QueuedCommunicator::stopWorker() {
  if (!worker_->thread.joinable())
    return;
  bool pending;
  {
    std::lock_guard<std::mutex> lock(worker_->mu);
    pending = !worker_->queue.empty();
    worker_->stopping = true;
    worker_->cv.notify_all();
  }
  if (pending)
    abort("rank " + std::to_string(rank()) + " closed its communicator with operations pending");
  worker_->thread.join();
}

Communicator::Ticket QueuedCommunicator::start(const CommOp &op) {
  std::lock_guard<std::mutex> lock(worker_->mu);
  worker_->queue.push_back({{op}, false});
  worker_->cv.notify_all();
  return ++worker_->issued;
}

Communicator::Ticket QueuedCommunicator::startExchange(const std::vector<CommOp> &ops) {
  std::lock_guard<std::mutex> lock(worker_->mu);
  worker_->queue.push_back({ops, true});
  worker_->cv.notify_all();
  return ++worker_->issued;
}

bool QueuedCommunicator::run(const CommOp &op, std::string &error) {
  return runItem({{op}, false}, error);
}

bool QueuedCommunicator::exchange(const std::vector<CommOp> &ops, std::string &error) {
  return runItem({ops, true}, error);
}

bool QueuedCommunicator::executeItem(const Item &item, std::string &error) {
  return item.exchange ? executeExchange(item.ops, error) : execute(item.ops[0], error);
}

bool QueuedCommunicator::executeExchange(const std::vector<CommOp> &ops, std::string &error) {
  for (const CommOp &op : ops)
    if (!execute(op, error))
      return false;
  return true;
}

bool QueuedCommunicator::runItem(Item item, std::string &error) {
  std::unique_lock<std::mutex> lock(worker_->mu);
  // An operation in the queue (or running on the worker) goes first.
  if (!worker_->queue.empty()) {
    worker_->queue.push_back(std::move(item));
    worker_->cv.notify_all();
    const Ticket ticket = ++worker_->issued;
    lock.unlock();
    return wait(ticket, error);
  }
  const Ticket ticket = ++worker_->issued;
  if (worker_->firstFailed != 0) {
    ++worker_->completed;
    error = worker_->failure;
    return false;
  }
  // Nothing else issues this rank's operations while it runs, so the worker stays idle.
  lock.unlock();
  bool ok = executeItem(item, error);
  lock.lock();
  ++worker_->completed;
  if (!ok && worker_->firstFailed == 0) {
    worker_->firstFailed = ticket;
    worker_->failure = error;
  }
  return ok;
}

bool QueuedCommunicator::wait(Ticket ticket, std::string &error) {
  std::unique_lock<std::mutex> lock(worker_->mu);
  if (ticket == 0 || ticket > worker_->issued) {
    error = "rank " + std::to_string(rank()) + " waits for operation " + std::to_string(ticket) +
            ", which it never started";
    return false;
  }
  worker_->cv.wait(lock, [&] { return worker_->completed >= ticket; });
  if (worker_->firstFailed != 0 && ticket >= worker_->firstFailed) {
    error = worker_->failure;
    return false;
  }
  return true;
}

} // namespace tessel::rt
