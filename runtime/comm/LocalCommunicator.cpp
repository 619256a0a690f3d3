//===- LocalCommunicator.cpp - Ranks as threads of one process ------------===//
//
// Every member of a collective posts its buffers into a shared round, waits until all have
// arrived, computes its part reading the others' buffers in place, and waits until all have
// finished reading before it returns (after which its buffers may change again). One mutex
// guards the whole world: waits are short and ranks few. Each rank waits on a condition
// variable of its own, and an event wakes only the ranks it concerns (a round's members, a
// message's receiver); an abort or a rank that stops running wakes them all. (With one
// condition variable for the world, every arrival woke every waiting rank, and with more ranks
// than cores those wake-ups were most of a run's system time.) A rank that cannot be joined
// because it stopped running, or because the world was aborted, is detected at once. One that
// is running but never comes (hung in a kernel or an allocator, or far slower than expected)
// is waited out to the rank's wait limit; the world knows whom each waiting rank waits for,
// so the message follows the waits to the rank that waits for nobody, or names the ranks
// that wait for one another.
//
// The bytes move through each member's CommMemory: memcpy on the CPU device, copies and a
// reduction kernel on a GPU (its ranks as threads sharing it). A member finishes its copies
// before it counts itself done with a round, so the barriers mean the same on both.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommMemory.h"
#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

namespace tessel::rt {

namespace {

using Clock = Communicator::Clock;

std::string describe(const CommOp &op) {
  std::string s = std::string(commKindName(op.kind)) + " " + planfile::dtypeName(op.type);
  switch (op.kind) {
  case CommOp::Kind::AllReduce:
    return s + "(" + (op.reduce == ReduceOp::Sum ? "sum" : "max") + ", n " + std::to_string(op.n) +
           ")";
  case CommOp::Kind::Broadcast:
    return s + "(root " + std::to_string(op.root) + ", n " + std::to_string(op.n) + ")";
  case CommOp::Kind::AllGather:
  case CommOp::Kind::ReduceScatter:
  case CommOp::Kind::AllToAll:
    return s + "(outer " + std::to_string(op.outer) + ", chunk " + std::to_string(op.chunk) + ")";
  case CommOp::Kind::Send:
  case CommOp::Kind::Recv:
    return s + "(peer " + std::to_string(op.peer) + ", tag " + std::to_string(op.tag) + ", n " +
           std::to_string(op.n) + ")";
  }
  return s;
}

/// Whether two members' operations are the same collective.
bool sameCollective(const CommOp &a, const CommOp &b) {
  return a.kind == b.kind && a.type == b.type && a.reduce == b.reduce && a.n == b.n &&
         a.outer == b.outer && a.chunk == b.chunk && a.root == b.root;
}

const char *asBytes(const void *p) { return static_cast<const char *>(p); }

} // namespace

//===----------------------------------------------------------------------===//
// The shared state of one world
//===----------------------------------------------------------------------===//

struct LocalCommunicator::World {
  World(uint32_t size, std::vector<CommMemory *> memory)
      : size(size), memory(std::move(memory)), wake(size), running(size, true),
        waitingFor(size) {}

  /// One collective on one group instance: the k-th that its members issue there.
  struct Round {
    CommOp first; ///< The first arrival's operation; every other must match it.
    std::vector<const void *> x;
    std::vector<void *> y;
    std::vector<bool> joined, done;
    uint32_t arrived = 0, finished = 0, left = 0;
    /// AllReduce: the result in f32, in the memory of the member whose arrival completed the
    /// round, each member computing a slice.
    std::shared_ptr<void> sum;
  };
  struct GroupState {
    std::vector<uint64_t> issued; ///< Per member: the collectives it has entered.
    std::map<uint64_t, Round> rounds;
  };
  using ChannelKey = std::tuple<uint32_t, uint32_t, int64_t>; // from, to, tag
  /// A buffered send: a copy of its data in the sender's memory.
  struct Message {
    std::shared_ptr<void> data;
    size_t bytes = 0;
    planfile::DType type = planfile::DType::F32;
  };

  const uint32_t size;
  /// Per rank: where its buffers are.
  const std::vector<CommMemory *> memory;
  std::mutex mu;
  /// Per rank: what its operation waits on. At most one thread waits on each (the rank's
  /// worker, or the thread that issues its operations when it runs one itself).
  std::vector<std::condition_variable> wake;
  bool aborted = false;
  std::string reason;
  std::vector<bool> running;
  std::map<std::vector<uint32_t>, GroupState> groups;
  std::map<ChannelKey, std::deque<Message>> channels;
  /// Per rank, while its operation waits: the ranks it waits for (they change as they come).
  std::vector<std::function<std::vector<uint32_t>()>> waitingFor;

  void abortLocked(const std::string &why) {
    if (!aborted) {
      aborted = true;
      reason = why;
    }
    wakeAll();
  }

  void wakeAll() {
    for (std::condition_variable &c : wake)
      c.notify_one();
  }

  void wakeMembers(const CommGroup &g) {
    for (uint32_t r : g.ranks)
      wake[r].notify_one();
  }

  bool failAborted(std::string &error) {
    error = "the communicator was aborted: " + reason;
    return false;
  }

  /// Runs `op` for `rank`; a failure aborts the world, so every later operation fails too.
  bool execute(uint32_t rank, const Communicator &self, const CommOp &op, std::string &error) {
    bool ok = false;
    switch (op.kind) {
    case CommOp::Kind::Send:
      ok = send(rank, op, error);
      break;
    case CommOp::Kind::Recv:
      ok = recv(rank, self, op, error);
      break;
    default:
      ok = collective(rank, self, op, error);
    }
    if (!ok) {
      std::lock_guard<std::mutex> lock(mu);
      if (!aborted)
        abortLocked("rank " + std::to_string(rank) + ": " + error);
    }
    return ok;
  }

  /// Waits, as `rank`, until `ready` holds, the world is aborted or `self`'s wait limit runs
  /// out; `whom` says whom it waits for meanwhile. Out of time, it aborts the world with a
  /// message that starts with what() and names who did not come, and returns false with it.
  template <typename What, typename Ready>
  bool waitUntil(std::unique_lock<std::mutex> &lock, uint32_t rank, const Communicator &self,
                 Clock::time_point started, What what, Ready ready,
                 std::function<std::vector<uint32_t>()> whom, std::string &error) {
    const Clock::time_point deadline = self.deadlineFromNow();
    waitingFor[rank] = std::move(whom);
    const bool inTime = wake[rank].wait_until(lock, deadline, [&] { return ready() || aborted; });
    if (!inTime) {
      error = what() + ": " + self.describeWait(started) + " for " + blame(rank);
      abortLocked(error);
    }
    waitingFor[rank] = nullptr;
    return inTime;
  }

  /// Whom `rank` waits for, followed through the ranks that wait in turn (explainWait).
  std::string blame(uint32_t rank) const {
    std::map<uint32_t, std::vector<uint32_t>> asked;
    return explainWait(
        rank, waitingFor[rank](),
        [&](uint32_t q) -> const std::vector<uint32_t> * {
          if (!waitingFor[q])
            return nullptr;
          return &(asked[q] = waitingFor[q]());
        },
        "waits for no peer: it is hung, or far slower than expected");
  }

  bool checkGroup(uint32_t rank, const CommOp &op, std::string &error) const {
    const CommGroup *g = op.group;
    if (!g || g->ranks.empty() || g->index >= g->size() || g->ranks[g->index] != rank) {
      error = std::string(commKindName(op.kind)) + " on a group that does not hold rank " +
              std::to_string(rank) + " at its index";
      return false;
    }
    for (uint32_t r : g->ranks)
      if (r >= size || std::count(g->ranks.begin(), g->ranks.end(), r) != 1) {
        error = std::string(commKindName(op.kind)) + " on group " + rankList(g->ranks) +
                ", which is not a set of ranks of this world of " + std::to_string(size);
        return false;
      }
    if ((op.kind == CommOp::Kind::Broadcast && op.root >= g->size()) || op.n < 0 || op.outer < 0 ||
        op.chunk < 0) {
      error = describe(op) + " has sizes that do not fit group " + rankList(g->ranks);
      return false;
    }
    return true;
  }

  /// The first member of `round` that has not arrived and no longer runs, or -1.
  int stoppedMember(const Round &round, const CommGroup &g) const {
    for (uint32_t i = 0; i < g.size(); ++i)
      if (!round.joined[i] && !running[g.ranks[i]])
        return static_cast<int>(g.ranks[i]);
    return -1;
  }

  bool collective(uint32_t rank, const Communicator &self, const CommOp &op,
                  std::string &error) {
    if (!checkGroup(rank, op, error))
      return false;
    const CommGroup &g = *op.group;
    const uint32_t me = g.index, ways = g.size();
    const Clock::time_point started = Clock::now();
    std::unique_lock<std::mutex> lock(mu);
    if (aborted)
      return failAborted(error);
    GroupState &state = groups[g.ranks];
    state.issued.resize(ways, 0);
    const uint64_t seq = state.issued[me]++;
    auto [it, fresh] = state.rounds.try_emplace(seq);
    Round &round = it->second;
    if (fresh) {
      round.first = op;
      round.x.assign(ways, nullptr);
      round.y.assign(ways, nullptr);
      round.joined.assign(ways, false);
      round.done.assign(ways, false);
    } else if (!sameCollective(round.first, op)) {
      error = "the ranks of group " + rankList(g.ranks) + " disagree about collective #" +
              std::to_string(seq) + ": one issued " + describe(round.first) + ", rank " +
              std::to_string(rank) + " " + describe(op);
      return false;
    }
    round.x[me] = op.x;
    round.y[me] = op.y;
    round.joined[me] = true;
    if (++round.arrived == ways) {
      if (op.kind == CommOp::Kind::AllReduce &&
          !(round.sum = memory[rank]->allocate(static_cast<size_t>(op.n) * sizeof(float)))) {
        abortLocked("rank " + std::to_string(rank) + ": no memory for the sum of " + describe(op));
        return failAborted(error);
      }
      wakeMembers(g);
    }
    auto what = [&] {
      return "rank " + std::to_string(rank) + ": " + describe(op) + " #" + std::to_string(seq) +
             " on group " + rankList(g.ranks);
    };
    auto missing = [&g](const std::vector<bool> &present) {
      std::vector<uint32_t> ranks;
      for (uint32_t i = 0; i < g.size(); ++i)
        if (!present[i])
          ranks.push_back(g.ranks[i]);
      return ranks;
    };
    if (!waitUntil(
            lock, rank, self, started, what,
            [&] { return round.arrived == ways || stoppedMember(round, g) >= 0; },
            [&] { return missing(round.joined); }, error))
      return false;
    if (aborted)
      return failAborted(error);
    if (round.arrived != ways) {
      error = "rank " + std::to_string(stoppedMember(round, g)) + " stopped without joining " +
              describe(op) + " #" + std::to_string(seq) + " on group " + rankList(g.ranks);
      return false;
    }
    lock.unlock();

    CommMemory &mem = *memory[rank];
    const bool computed = compute(mem, round, op, me, ways);
    if (!mem.finish(error))
      return false;
    if (!computed) {
      lock.lock();
      abortLocked("rank " + std::to_string(rank) + ": no memory for the f32 sums of " +
                  describe(op));
      return failAborted(error);
    }

    lock.lock();
    round.done[me] = true;
    if (++round.finished == ways)
      wakeMembers(g);
    if (!waitUntil(
            lock, rank, self, started, what, [&] { return round.finished == ways; },
            [&] { return missing(round.done); }, error))
      return false;
    if (aborted)
      return failAborted(error);
    lock.unlock();
    // Every member has finished reading the others' x: y may be x now.
    if (op.kind == CommOp::Kind::AllReduce && op.n > 0) {
      mem.narrow(op.y, op.type, static_cast<const float *>(round.sum.get()), op.n);
      if (!mem.finish(error))
        return false;
    }
    lock.lock();
    if (++round.left == ways)
      state.rounds.erase(it);
    return true;
  }

  /// This member's share of the work, reading every member's x in place; false where it has
  /// no memory for a 16-bit reduction's f32 sums.
  static bool compute(CommMemory &mem, Round &round, const CommOp &op, uint32_t me, uint32_t ways) {
    const size_t chunkBytes = commBytes(op, op.chunk);
    char *y = static_cast<char *>(op.y);
    auto element = [&](uint32_t r, int64_t i) { return asBytes(round.x[r]) + commBytes(op, i); };
    switch (op.kind) {
    case CommOp::Kind::AllReduce: {
      // Member `me` sums a slice of the elements for everyone, in group-index order.
      const int64_t lo = op.n * me / ways, hi = op.n * (me + 1) / ways;
      float *out = static_cast<float *>(round.sum.get());
      if (hi == lo)
        break;
      mem.widen(out + lo, element(0, lo), op.type, hi - lo);
      for (uint32_t r = 1; r < ways; ++r)
        mem.reduce(op.reduce, out + lo, element(r, lo), op.type, hi - lo);
      break;
    }
    case CommOp::Kind::AllGather:
      for (int64_t o = 0; o < op.outer; ++o)
        for (uint32_t r = 0; r < ways; ++r)
          mem.copy(y + (o * ways + r) * chunkBytes, asBytes(round.x[r]) + o * chunkBytes,
                   chunkBytes);
      break;
    case CommOp::Kind::ReduceScatter: {
      // f32 sums straight into y; 16-bit ones into f32 first, rounded once at the end.
      std::shared_ptr<void> wide;
      if (op.type != planfile::DType::F32 &&
          !(wide = mem.allocate(op.outer * op.chunk * sizeof(float))))
        return false;
      float *sums = wide ? static_cast<float *>(wide.get()) : static_cast<float *>(op.y);
      for (int64_t o = 0; o < op.outer; ++o) {
        float *out = sums + o * op.chunk;
        const int64_t at = (o * ways + me) * op.chunk;
        mem.widen(out, element(0, at), op.type, op.chunk);
        for (uint32_t r = 1; r < ways; ++r)
          mem.reduce(ReduceOp::Sum, out, element(r, at), op.type, op.chunk);
      }
      if (wide)
        mem.narrow(op.y, op.type, sums, op.outer * op.chunk);
      break;
    }
    case CommOp::Kind::AllToAll:
      for (int64_t o = 0; o < op.outer; ++o)
        for (uint32_t r = 0; r < ways; ++r)
          mem.copy(y + (o * ways + r) * chunkBytes,
                   asBytes(round.x[r]) + (o * ways + me) * chunkBytes, chunkBytes);
      break;
    case CommOp::Kind::Broadcast:
      if (op.y != round.x[op.root] && op.n > 0)
        mem.copy(op.y, round.x[op.root], commBytes(op, op.n));
      break;
    case CommOp::Kind::Send:
    case CommOp::Kind::Recv:
      break;
    }
    return true;
  }

  bool checkPeer(uint32_t rank, const CommOp &op, std::string &error) const {
    if (op.peer >= size || op.peer == rank || op.n < 0) {
      error = describe(op) + " on rank " + std::to_string(rank) + ": the peer must be another " +
              "rank of this world of " + std::to_string(size);
      return false;
    }
    return true;
  }

  bool send(uint32_t rank, const CommOp &op, std::string &error) {
    if (!checkPeer(rank, op, error))
      return false;
    // Buffered: the data is copied now, so a send never waits for its receive.
    CommMemory &mem = *memory[rank];
    Message message;
    message.bytes = commBytes(op, op.n);
    message.type = op.type;
    if (!(message.data = mem.allocate(message.bytes))) {
      error = describe(op) + " on rank " + std::to_string(rank) + ": no memory to buffer it";
      return false;
    }
    mem.copy(message.data.get(), op.x, message.bytes);
    if (!mem.finish(error))
      return false;
    std::lock_guard<std::mutex> lock(mu);
    if (aborted)
      return failAborted(error);
    channels[{rank, op.peer, op.tag}].push_back(std::move(message));
    wake[op.peer].notify_one();
    return true;
  }

  bool recv(uint32_t rank, const Communicator &self, const CommOp &op, std::string &error) {
    if (!checkPeer(rank, op, error))
      return false;
    const Clock::time_point started = Clock::now();
    std::unique_lock<std::mutex> lock(mu);
    std::deque<Message> &queue = channels[{op.peer, rank, op.tag}];
    if (!waitUntil(
            lock, rank, self, started,
            [&] { return "rank " + std::to_string(rank) + ": " + describe(op); },
            [&] { return !queue.empty() || !running[op.peer]; },
            [peer = op.peer] { return std::vector<uint32_t>{peer}; }, error))
      return false;
    if (aborted)
      return failAborted(error);
    if (queue.empty()) {
      error = "rank " + std::to_string(op.peer) + " stopped without sending what rank " +
              std::to_string(rank) + "'s " + describe(op) + " waits for";
      return false;
    }
    Message message = std::move(queue.front());
    queue.pop_front();
    lock.unlock();
    if (message.type != op.type || message.bytes != commBytes(op, op.n)) {
      error = describe(op) + " on rank " + std::to_string(rank) + " received " +
              std::to_string(message.bytes / planfile::dtypeBytes(message.type)) + " " +
              planfile::dtypeName(message.type) + " elements";
      return false;
    }
    CommMemory &mem = *memory[rank];
    mem.copy(op.y, message.data.get(), message.bytes);
    return mem.finish(error);
  }
};

std::vector<std::unique_ptr<LocalCommunicator>>
LocalCommunicator::createWorld(uint32_t size, const std::vector<CommMemory *> &memories) {
  std::vector<CommMemory *> memory(size, &hostMemory());
  for (uint32_t r = 0; r < size && r < memories.size(); ++r)
    if (memories[r])
      memory[r] = memories[r];
  auto world = std::make_shared<World>(size, std::move(memory));
  std::vector<std::unique_ptr<LocalCommunicator>> comms;
  for (uint32_t r = 0; r < size; ++r)
    comms.emplace_back(new LocalCommunicator(world, r));
  return comms;
}

LocalCommunicator::LocalCommunicator(std::shared_ptr<World> world, uint32_t rank)
    : world_(std::move(world)), rank_(rank) {
  startWorker();
}

LocalCommunicator::~LocalCommunicator() { stopWorker(); }

uint32_t LocalCommunicator::worldSize() const { return world_->size; }

bool LocalCommunicator::execute(const CommOp &op, std::string &error) {
  return world_->execute(rank_, *this, op, error);
}

void LocalCommunicator::abort(const std::string &reason) {
  std::lock_guard<std::mutex> lock(world_->mu);
  world_->abortLocked(reason);
}

bool LocalCommunicator::aborted(std::string *reason) const {
  std::lock_guard<std::mutex> lock(world_->mu);
  if (world_->aborted && reason)
    *reason = world_->reason;
  return world_->aborted;
}

void LocalCommunicator::setRunning(bool running) {
  std::lock_guard<std::mutex> lock(world_->mu);
  world_->running[rank_] = running;
  // A peer waiting for this rank learns that it stopped.
  if (!running)
    world_->wakeAll();
}

} // namespace tessel::rt
