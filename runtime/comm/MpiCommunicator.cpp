//===- MpiCommunicator.cpp - Ranks as MPI processes -----------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef TESSEL_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <list>
#include <map>
#include <thread>
#include <vector>
#endif

namespace tessel::rt::mpi {

bool launched() {
  for (const char *var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(var))
      return true;
  return false;
}

#ifndef TESSEL_HAVE_MPI

bool available() { return false; }
bool initialize(std::string &error) {
  error = "this runtime was built without MPI, so it cannot run as MPI processes; run the "
          "program without mpirun to run its ranks as threads";
  return false;
}
uint32_t processRank() { return 0; }
uint32_t processCount() { return 1; }
uint32_t processesOnThisHost() { return 1; }
uint32_t processIndexOnThisHost() { return 0; }
void finalize() {}
void abortJob(int code) { std::_Exit(code); }
std::unique_ptr<Communicator> createCommunicator(std::string &error) {
  initialize(error);
  return nullptr;
}

#else

namespace {

bool initialized = false;
uint32_t worldRank = 0, worldSize = 1, hostSize = 1, hostRank = 0;

/// The tag of the messages that collectives exchange. A point-to-point tag t (the runtime's
/// own pipeline transfers use negative ones) travels as 2t + 2 when t >= 0, else as -2t + 1.
constexpr int kCollectiveTag = 0;
int64_t mpiTag(int64_t tag) { return tag >= 0 ? 2 * tag + 2 : -2 * tag + 1; }
/// MPI counts are ints: larger messages travel in pieces of this many bytes, cut the same way
/// by sender and receiver.
constexpr size_t kPieceBytes = size_t(1) << 30;

bool ok(int rc, const std::string &what, std::string &error) {
  if (rc == MPI_SUCCESS)
    return true;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  error = what + " failed: " + std::string(text, static_cast<size_t>(length));
  return false;
}

/// Posts a send (or a receive) of `bytes` at `data` in pieces MPI can count, each request
/// appended to `requests`; the first failure's code, or MPI_SUCCESS.
enum class Post { Send, SynchronousSend, Recv };

int post(Post kind, const void *data, size_t bytes, uint32_t peer, int tag,
         std::vector<MPI_Request> &requests) {
  char *p = static_cast<char *>(const_cast<void *>(data));
  do {
    size_t piece = std::min(bytes, kPieceBytes);
    requests.emplace_back();
    const int count = static_cast<int>(piece), to = static_cast<int>(peer);
    MPI_Request *r = &requests.back();
    int rc = kind == Post::Send ? MPI_Isend(p, count, MPI_BYTE, to, tag, MPI_COMM_WORLD, r)
             : kind == Post::SynchronousSend
                 ? MPI_Issend(p, count, MPI_BYTE, to, tag, MPI_COMM_WORLD, r)
                 : MPI_Irecv(p, count, MPI_BYTE, to, tag, MPI_COMM_WORLD, r);
    if (rc != MPI_SUCCESS) {
      requests.back() = MPI_REQUEST_NULL; // Nothing to wait for.
      return rc;
    }
    p += piece;
    bytes -= piece;
  } while (bytes > 0);
  return MPI_SUCCESS;
}

/// Waits for MPI requests within a communicator's wait limit, answering meanwhile the other
/// processes' questions about whom this one waits for (see MpiCommunicator::investigate).
class Waiter {
public:
  virtual ~Waiter() = default;
  /// Completes every request of `requests` (those to or from `peers[i]`), or fails with the
  /// reason once the wait limit runs out, `what` naming the operation.
  virtual bool waitAll(std::vector<MPI_Request> &requests, const std::vector<uint32_t> &peers,
                       const std::string &what, std::string &error) = 0;
};

/// The requests of one exchange, completed together.
class Requests {
public:
  void send(const void *data, size_t bytes, uint32_t to, int tag) {
    note(post(Post::Send, data, bytes, to, tag, requests_), to);
  }
  /// Done only once the receive has started.
  void synchronousSend(const void *data, size_t bytes, uint32_t to, int tag) {
    note(post(Post::SynchronousSend, data, bytes, to, tag, requests_), to);
  }
  void recv(void *data, size_t bytes, uint32_t from, int tag) {
    note(post(Post::Recv, data, bytes, from, tag, requests_), from);
  }
  bool wait(Waiter &waiter, const std::string &what, std::string &error) {
    bool done = waiter.waitAll(requests_, peers_, what, error);
    requests_.clear();
    peers_.clear();
    if (posted_ != MPI_SUCCESS)
      done = ok(posted_, what, error);
    posted_ = MPI_SUCCESS;
    return done;
  }

private:
  void note(int rc, uint32_t peer) {
    peers_.resize(requests_.size(), peer);
    if (posted_ == MPI_SUCCESS)
      posted_ = rc;
  }
  std::vector<MPI_Request> requests_;
  std::vector<uint32_t> peers_; ///< Per request: the other process.
  int posted_ = MPI_SUCCESS;    ///< The first failure to post, reported by wait().
};

/// The tags of the messages on the control communicator, which only runs out of time uses.
constexpr int kWhomQueryTag = 1, kWhomAnswerTag = 2, kVerdictTag = 3;
/// How long an investigation waits for a process's answer: one waiting for a peer answers
/// within a millisecond.
constexpr double kAnswerSeconds = 3.0;

class MpiCommunicator final : public QueuedCommunicator, private Waiter {
public:
  MpiCommunicator(uint32_t rank, uint32_t size, MPI_Comm control)
      : rank_(rank), size_(size), control_(control) {
    startWorker();
  }
  ~MpiCommunicator() override {
    stopWorker();
    for (Answer &a : answers_)
      MPI_Request_free(&a.request);
    // Buffered sends still in flight complete once their receivers take them.
    for (PendingSend &s : sends_)
      MPI_Waitall(static_cast<int>(s.requests.size()), s.requests.data(), MPI_STATUSES_IGNORE);
  }

  uint32_t rank() const override { return rank_; }
  uint32_t worldSize() const override { return size_; }
  void abort(const std::string &reason) override {
    std::fprintf(stderr, "tessel: error: %s\n", reason.c_str());
    std::fflush(stderr);
    abortJob(1);
  }
  bool aborted(std::string *) const override { return false; }
  void setRunning(bool) override {}

private:
  struct PendingSend {
    std::vector<MPI_Request> requests;
    std::vector<char> bytes;
  };
  /// An answer to another process's question, in flight.
  struct Answer {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<int32_t> ranks;
  };

  /// Polls, rather than blocking in MPI_Waitall, to see the deadline and to answer questions:
  /// at first as tightly as MPI_Waitall would, then, in a long wait, resting between polls.
  bool waitAll(std::vector<MPI_Request> &requests, const std::vector<uint32_t> &peers,
               const std::string &what, std::string &error) override {
    const Clock::time_point started = Clock::now(), deadline = deadlineFromNow();
    std::vector<int> indices(requests.size());
    auto waitingFor = [&] {
      std::vector<uint32_t> ranks;
      for (size_t i = 0; i < requests.size(); ++i)
        if (requests[i] != MPI_REQUEST_NULL &&
            std::find(ranks.begin(), ranks.end(), peers[i]) == ranks.end())
          ranks.push_back(peers[i]);
      std::sort(ranks.begin(), ranks.end());
      return ranks;
    };
    for (;;) {
      int finished = 0;
      const int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &finished,
                                  indices.data(), MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS)
        return ok(rc, what, error);
      if (finished == MPI_UNDEFINED) // Every request is done.
        return true;
      if (finished > 0)
        continue;
      const Clock::time_point now = Clock::now();
      // The questions and a verdict need no haste: a short wait does not look for them.
      if (now - started < std::chrono::milliseconds(1))
        continue;
      answerQuestions(waitingFor);
      std::string verdict;
      if (now >= deadline || takeVerdict(verdict)) {
        if (verdict.empty()) {
          error = what + ": " + describeWait(started) + " for ";
          error += investigate(waitingFor(), verdict);
        }
        if (verdict.empty())
          announce(error);
        else
          error = what + " ends with the job: " + verdict;
        // The buffers go with the operation: no late message may land in them.
        for (MPI_Request &r : requests)
          if (r != MPI_REQUEST_NULL) {
            MPI_Cancel(&r);
            MPI_Request_free(&r);
          }
        return false;
      }
      if (now - started > std::chrono::seconds(1))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else if (now - started > std::chrono::milliseconds(10))
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  /// Answers each process that asked whom this one waits for, with the ranks `waitingFor`
  /// gives; forgets the answers that have gone.
  template <typename WaitingFor> void answerQuestions(WaitingFor waitingFor) {
    for (;;) {
      int asked = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kWhomQueryTag, control_, &asked, &status) != MPI_SUCCESS ||
          !asked)
        break;
      int32_t from = 0;
      MPI_Recv(&from, 1, MPI_INT32_T, status.MPI_SOURCE, kWhomQueryTag, control_,
               MPI_STATUS_IGNORE);
      answers_.emplace_back();
      Answer &a = answers_.back();
      for (uint32_t r : waitingFor())
        a.ranks.push_back(static_cast<int32_t>(r));
      MPI_Isend(a.ranks.data(), static_cast<int>(a.ranks.size()), MPI_INT32_T, status.MPI_SOURCE,
                kWhomAnswerTag, control_, &a.request);
    }
    for (auto it = answers_.begin(); it != answers_.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? answers_.erase(it) : std::next(it);
    }
  }

  /// Whom this process, out of time waiting for the ranks `direct`, waited for: asks each of
  /// them whom it waits for, and so on, giving each kAnswerSeconds to answer; the first that
  /// does not answer is stopped, hung or lost (explainWait). Processes that wait answer from
  /// their polling loops; one that is stuck outside the communicator cannot. Where another
  /// process's verdict comes meanwhile, it goes to `verdict` and the investigation stops.
  std::string investigate(const std::vector<uint32_t> &direct, std::string &verdict) {
    using Seconds = std::chrono::duration<double>;
    std::map<uint32_t, Clock::time_point> asked;  // rank -> when it was asked
    std::map<uint32_t, std::vector<uint32_t>> said; // rank -> whom it waits for
    auto ask = [&](uint32_t r) {
      if (r == rank_ || asked.count(r))
        return;
      asked[r] = Clock::now();
      MPI_Request request;
      if (MPI_Isend(&rankId_, 1, MPI_INT32_T, static_cast<int>(r), kWhomQueryTag, control_,
                    &request) == MPI_SUCCESS)
        MPI_Request_free(&request); // rankId_ outlives the send.
    };
    for (uint32_t r : direct)
      ask(r);
    for (;;) {
      answerQuestions([&] { return direct; });
      if (takeVerdict(verdict))
        return std::string();
      int answered = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kWhomAnswerTag, control_, &answered, &status) ==
              MPI_SUCCESS &&
          answered) {
        int count = 0;
        MPI_Get_count(&status, MPI_INT32_T, &count);
        std::vector<int32_t> ranks(static_cast<size_t>(std::max(count, 0)));
        MPI_Recv(ranks.data(), count, MPI_INT32_T, status.MPI_SOURCE, kWhomAnswerTag, control_,
                 MPI_STATUS_IGNORE);
        std::vector<uint32_t> &whom = said[static_cast<uint32_t>(status.MPI_SOURCE)];
        for (int32_t r : ranks)
          if (r >= 0 && static_cast<uint32_t>(r) < size_) {
            whom.push_back(static_cast<uint32_t>(r));
            ask(static_cast<uint32_t>(r));
          }
        continue;
      }
      bool pending = false;
      for (const auto &[r, when] : asked)
        pending |= !said.count(r) && Seconds(Clock::now() - when).count() < kAnswerSeconds;
      if (!pending)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return explainWait(
        rank_, direct,
        [&](uint32_t q) -> const std::vector<uint32_t> * {
          auto it = said.find(q);
          return it == said.end() ? nullptr : &it->second;
        },
        "does not answer: it is stopped, hung or lost, or far slower than expected");
  }

  /// Tells every other process why this one ends the job, so that all of them say the same
  /// (a stopped process, resumed as the launcher takes the job down, would otherwise give
  /// answers that read as a deadlock); waits a moment for the messages to leave.
  void announce(const std::string &verdict) {
    verdict_ = verdict;
    std::vector<MPI_Request> sent;
    for (uint32_t r = 0; r < size_; ++r)
      if (r != rank_ &&
          MPI_Isend(verdict_.data(), static_cast<int>(verdict_.size()), MPI_CHAR,
                    static_cast<int>(r), kVerdictTag, control_, &sent.emplace_back()) != MPI_SUCCESS)
        sent.pop_back();
    const Clock::time_point until = Clock::now() + std::chrono::seconds(1);
    for (int done = 0; !done && Clock::now() < until;) {
      MPI_Testall(static_cast<int>(sent.size()), sent.data(), &done, MPI_STATUSES_IGNORE);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  /// Another process's verdict (announce), if one has come.
  bool takeVerdict(std::string &verdict) {
    int sent = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kVerdictTag, control_, &sent, &status) != MPI_SUCCESS || !sent)
      return false;
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    verdict.assign(static_cast<size_t>(std::max(count, 0)), '\0');
    MPI_Recv(verdict.data(), count, MPI_CHAR, status.MPI_SOURCE, kVerdictTag, control_,
             MPI_STATUS_IGNORE);
    return !verdict.empty();
  }

  bool execute(const CommOp &op, std::string &error) override {
    reapSends();
    const std::string what = "rank " + std::to_string(rank_) + ": " + commKindName(op.kind);
    if (op.kind == CommOp::Kind::Send || op.kind == CommOp::Kind::Recv)
      return pointToPoint(op, what, error);
    const CommGroup *g = op.group;
    if (!g || g->index >= g->size() || g->ranks[g->index] != rank_ || op.n < 0 || op.outer < 0 ||
        op.chunk < 0) {
      error = what + " on a group that does not hold this rank at its index";
      return false;
    }
    for (uint32_t r : g->ranks)
      if (r >= size_) {
        error = what + " on a group naming rank " + std::to_string(r) + " of a world of " +
                std::to_string(size_);
        return false;
      }
    switch (op.kind) {
    case CommOp::Kind::AllReduce:
      return allReduce(op, *g, what, error);
    case CommOp::Kind::ReduceScatter:
      return reduceScatter(op, *g, what, error);
    case CommOp::Kind::AllGather:
    case CommOp::Kind::AllToAll:
      return gatherOrExchange(op, *g, what, error);
    case CommOp::Kind::Broadcast:
      return broadcast(op, *g, what, error);
    default:
      error = what + ": not a collective";
      return false;
    }
  }

  /// Member j's share [lo, hi) of n elements, as LocalCommunicator cuts them.
  static int64_t cut(int64_t n, uint32_t j, uint32_t ways) { return n * j / ways; }

  bool allReduce(const CommOp &op, const CommGroup &g, const std::string &what,
                 std::string &error) {
    const uint32_t me = g.index, ways = g.size();
    const char *x = static_cast<const char *>(op.x);
    char *y = static_cast<char *>(op.y);
    const int64_t lo = cut(op.n, me, ways), mine = cut(op.n, me + 1, ways) - lo;
    const size_t mineBytes = commBytes(op, mine);
    // Each member reduces its share of the elements, adding the members' values in
    // group-index order in f32, then the shares, rounded to the type, are gathered to everyone.
    std::vector<std::vector<char>> parts(ways);
    Requests reqs;
    for (uint32_t j = 0; j < ways; ++j) {
      if (j == me)
        continue;
      const int64_t at = cut(op.n, j, ways), len = cut(op.n, j + 1, ways) - at;
      reqs.send(x + commBytes(op, at), commBytes(op, len), g.ranks[j], kCollectiveTag);
      parts[j].resize(mineBytes);
      reqs.recv(parts[j].data(), mineBytes, g.ranks[j], kCollectiveTag);
    }
    if (!reqs.wait(*this, what, error))
      return false;
    std::vector<float> sum(static_cast<size_t>(mine));
    auto share = [&](uint32_t r) -> const void * {
      return r == me ? x + commBytes(op, lo) : parts[r].data();
    };
    widenInto(sum.data(), share(0), op.type, mine);
    for (uint32_t r = 1; r < ways; ++r)
      reduceInto(op.reduce, sum.data(), share(r), op.type, mine);
    std::vector<char> result(mineBytes);
    narrowInto(result.data(), op.type, sum.data(), mine);
    // Every member's sends from x are done: y may be x.
    for (uint32_t j = 0; j < ways; ++j) {
      if (j == me)
        continue;
      const int64_t at = cut(op.n, j, ways), len = cut(op.n, j + 1, ways) - at;
      reqs.send(result.data(), mineBytes, g.ranks[j], kCollectiveTag);
      reqs.recv(y + commBytes(op, at), commBytes(op, len), g.ranks[j], kCollectiveTag);
    }
    if (mine > 0)
      std::memcpy(y + commBytes(op, lo), result.data(), mineBytes);
    return reqs.wait(*this, what, error);
  }

  /// x [outer, ways, chunk] -> the [outer, chunk] pieces of column j, contiguous.
  static std::vector<char> column(const CommOp &op, uint32_t j, uint32_t ways) {
    const size_t chunkBytes = commBytes(op, op.chunk);
    std::vector<char> out(static_cast<size_t>(op.outer) * chunkBytes);
    for (int64_t o = 0; o < op.outer; ++o)
      std::memcpy(out.data() + o * chunkBytes,
                  static_cast<const char *>(op.x) + (o * ways + j) * chunkBytes, chunkBytes);
    return out;
  }

  bool reduceScatter(const CommOp &op, const CommGroup &g, const std::string &what,
                     std::string &error) {
    const uint32_t me = g.index, ways = g.size();
    const int64_t n = op.outer * op.chunk;
    const size_t bytes = commBytes(op, n);
    std::vector<std::vector<char>> out(ways), in(ways);
    Requests reqs;
    for (uint32_t j = 0; j < ways; ++j) {
      if (j == me)
        continue;
      out[j] = column(op, j, ways);
      reqs.send(out[j].data(), bytes, g.ranks[j], kCollectiveTag);
      in[j].resize(bytes);
      reqs.recv(in[j].data(), bytes, g.ranks[j], kCollectiveTag);
    }
    in[me] = column(op, me, ways);
    if (!reqs.wait(*this, what, error))
      return false;
    // f32 sums straight into y; 16-bit ones into f32 first, rounded once at the end.
    std::vector<float> wide(op.type == planfile::DType::F32 ? 0 : static_cast<size_t>(n));
    float *sum = op.type == planfile::DType::F32 ? static_cast<float *>(op.y) : wide.data();
    widenInto(sum, in[0].data(), op.type, n);
    for (uint32_t r = 1; r < ways; ++r)
      reduceInto(ReduceOp::Sum, sum, in[r].data(), op.type, n);
    if (op.type != planfile::DType::F32)
      narrowInto(op.y, op.type, sum, n);
    return true;
  }

  /// AllGather (y[o, r] = x of r [o]) and AllToAll (y[o, r] = x of r [o, me]): moves bits.
  bool gatherOrExchange(const CommOp &op, const CommGroup &g, const std::string &what,
                        std::string &error) {
    const uint32_t me = g.index, ways = g.size();
    const bool gather = op.kind == CommOp::Kind::AllGather;
    const size_t chunkBytes = commBytes(op, op.chunk);
    const size_t bytes = static_cast<size_t>(op.outer) * chunkBytes;
    std::vector<std::vector<char>> out(ways), in(ways);
    Requests reqs;
    for (uint32_t j = 0; j < ways; ++j) {
      if (j == me)
        continue;
      if (gather) {
        reqs.send(op.x, bytes, g.ranks[j], kCollectiveTag);
      } else {
        out[j] = column(op, j, ways);
        reqs.send(out[j].data(), bytes, g.ranks[j], kCollectiveTag);
      }
      in[j].resize(bytes);
      reqs.recv(in[j].data(), bytes, g.ranks[j], kCollectiveTag);
    }
    in[me] = gather ? std::vector<char>(static_cast<const char *>(op.x),
                                        static_cast<const char *>(op.x) + bytes)
                    : column(op, me, ways);
    if (!reqs.wait(*this, what, error))
      return false;
    char *y = static_cast<char *>(op.y);
    for (int64_t o = 0; o < op.outer; ++o)
      for (uint32_t r = 0; r < ways; ++r)
        std::memcpy(y + (o * ways + r) * chunkBytes, in[r].data() + o * chunkBytes, chunkBytes);
    return true;
  }

  bool broadcast(const CommOp &op, const CommGroup &g, const std::string &what,
                 std::string &error) {
    if (op.root >= g.size()) {
      error = what + ": root " + std::to_string(op.root) + " is not a member";
      return false;
    }
    const size_t bytes = commBytes(op, op.n);
    Requests reqs;
    if (g.index == op.root) {
      for (uint32_t j = 0; j < g.size(); ++j)
        if (j != op.root)
          reqs.send(op.x, bytes, g.ranks[j], kCollectiveTag);
      if (op.y != op.x && bytes > 0)
        std::memcpy(op.y, op.x, bytes);
    } else {
      reqs.recv(op.y, bytes, g.ranks[op.root], kCollectiveTag);
    }
    return reqs.wait(*this, what, error);
  }

  /// The MPI tag of point-to-point `op`; -1 with the reason if `op` names no other rank or
  /// its tag does not fit.
  int checkedTag(const CommOp &op, const std::string &what, std::string &error) const {
    if (op.peer >= size_ || op.peer == rank_ || op.n < 0) {
      error = what + " to or from rank " + std::to_string(op.peer) +
              ": the peer must be another rank of this world of " + std::to_string(size_);
      return -1;
    }
    void *attr = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &found);
    const int64_t upper = found ? *static_cast<int *>(attr) : 32767;
    if (op.tag > upper / 2 - 1 || op.tag < -(upper - 1) / 2) {
      error = what + ": tag " + std::to_string(op.tag) + " is beyond what MPI carries";
      return -1;
    }
    return static_cast<int>(mpiTag(op.tag));
  }

  bool pointToPoint(const CommOp &op, const std::string &what, std::string &error) {
    const int tag = checkedTag(op, what, error);
    if (tag < 0)
      return false;
    const size_t bytes = commBytes(op, op.n);
    if (op.kind == CommOp::Kind::Recv) {
      Requests reqs;
      reqs.recv(op.y, bytes, op.peer, tag);
      return reqs.wait(*this, what + " from rank " + std::to_string(op.peer), error);
    }
    // Buffered, as between threads: the data is copied, so a send never waits for its receive.
    const char *x = static_cast<const char *>(op.x);
    sends_.push_back(PendingSend{{}, std::vector<char>(x, x + bytes)});
    PendingSend &s = sends_.back();
    return ok(post(Post::Send, s.bytes.data(), bytes, op.peer, tag, s.requests),
              what + " to rank " + std::to_string(op.peer), error);
  }

  /// An exchange's sends are synchronous (done only once their receives have started) and
  /// not copied, as NCCL's: a pipeline's exchanges run on the CPU as they must on GPUs, so a
  /// schedule that would deadlock over NCCL deadlocks here too rather than only there.
  bool executeExchange(const std::vector<CommOp> &ops, std::string &error) override {
    reapSends();
    Requests reqs;
    std::string what = "rank " + std::to_string(rank_) + ": exchange";
    for (const CommOp &op : ops) {
      if (op.kind != CommOp::Kind::Send && op.kind != CommOp::Kind::Recv) {
        error = what + " holds a " + commKindName(op.kind) + ", not a send or receive";
        return false;
      }
      const int tag = checkedTag(op, what, error);
      if (tag < 0)
        return false;
      const bool sending = op.kind == CommOp::Kind::Send;
      what += std::string(sending ? ", send to " : ", receive from ") + std::to_string(op.peer);
      if (sending)
        reqs.synchronousSend(op.x, commBytes(op, op.n), op.peer, tag);
      else
        reqs.recv(op.y, commBytes(op, op.n), op.peer, tag);
    }
    return reqs.wait(*this, what, error);
  }

  /// Forgets the buffered sends that have completed.
  void reapSends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(), &done,
                  MPI_STATUSES_IGNORE);
      it = done ? sends_.erase(it) : std::next(it);
    }
  }

  uint32_t rank_, size_;
  MPI_Comm control_; ///< A duplicate of the world's, for the questions of investigate().
  const int32_t rankId_ = static_cast<int32_t>(rank_); ///< What a question sends.
  std::string verdict_; ///< What announce() sends, kept while it is sent.
  std::list<PendingSend> sends_;
  std::list<Answer> answers_;
};

} // namespace

bool available() { return true; }

bool initialize(std::string &error) {
  if (initialized)
    return true;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    error = "MPI could not be initialised";
    return false;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    error = "this MPI library cannot be called from the communication thread (thread level " +
            std::to_string(provided) + ")";
    return false;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  worldRank = static_cast<uint32_t>(rank);
  worldSize = static_cast<uint32_t>(size);
  MPI_Comm host;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host) ==
      MPI_SUCCESS) {
    int onHost = 1, here = 0;
    MPI_Comm_size(host, &onHost);
    MPI_Comm_rank(host, &here);
    hostSize = static_cast<uint32_t>(onHost);
    hostRank = static_cast<uint32_t>(here);
    MPI_Comm_free(&host);
  }
  initialized = true;
  return true;
}

uint32_t processRank() { return worldRank; }
uint32_t processCount() { return worldSize; }
uint32_t processesOnThisHost() { return hostSize; }
uint32_t processIndexOnThisHost() { return hostRank; }

void finalize() {
  if (!initialized)
    return;
  MPI_Finalize();
  initialized = false;
}

void abortJob(int code) {
  if (initialized)
    MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::unique_ptr<Communicator> createCommunicator(std::string &error) {
  if (!initialize(error))
    return nullptr;
  MPI_Comm control;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &control) != MPI_SUCCESS) {
    error = "MPI could not make the communicator's control channel";
    return nullptr;
  }
  MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(worldRank, worldSize, control);
}

#endif

} // namespace tessel::rt::mpi
