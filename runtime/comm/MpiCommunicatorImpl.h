//===- MpiCommunicatorImpl.h - The MPI communicator's class -----*- C++ -*-===//
//
// The MPI communicator is defined in four files by concern: MpiCommunicator.cpp starts MPI and
// makes and ends the communicator, MpiWaits.cpp waits for its messages within the wait limit
// (and, out of time, finds whom the wait waits for), MpiCollectives.cpp builds the collectives
// from messages, and MpiPointToPoint.cpp sends, receives and exchanges. They share this class
// and the way its messages are posted. Only built with MPI (TESSEL_HAVE_MPI).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_MPICOMMUNICATORIMPL_H
#define TESSEL_RUNTIME_COMM_MPICOMMUNICATORIMPL_H

#include "runtime/comm/MpiCommunicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <list>
#include <string>
#include <vector>

namespace tessel::rt::mpi::detail {

/// The tag of the messages that collectives exchange. A point-to-point tag t (the runtime's
/// own pipeline transfers use negative ones) travels as 2t + 2 when t >= 0, else as -2t + 1.
constexpr int kCollectiveTag = 0;
inline int64_t mpiTag(int64_t tag) { return tag >= 0 ? 2 * tag + 2 : -2 * tag + 1; }
/// MPI counts are ints: larger messages travel in pieces of this many bytes, cut the same way
/// by sender and receiver.
constexpr size_t kPieceBytes = size_t(1) << 30;

inline bool ok(int rc, const std::string &what, std::string &error) {
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

inline int post(Post kind, const void *data, size_t bytes, uint32_t peer, int tag,
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

class MpiCommunicator final : public QueuedCommunicator, private Waiter {
public:
  MpiCommunicator(uint32_t rank, uint32_t size, MPI_Comm control);
  ~MpiCommunicator() override;

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

  // Waiting (MpiWaits.cpp).
  /// Polls, rather than blocking in MPI_Waitall, to see the deadline and to answer questions:
  /// at first as tightly as MPI_Waitall would, then, in a long wait, resting between polls.
  bool waitAll(std::vector<MPI_Request> &requests, const std::vector<uint32_t> &peers,
               const std::string &what, std::string &error) override;
  /// Answers each process that asked whom this one waits for, with the ranks `waitingFor`
  /// gives; forgets the answers that have gone.
  template <typename WaitingFor> void answerQuestions(WaitingFor waitingFor);
  /// Whom this process, out of time waiting for the ranks `direct`, waited for: asks each of
  /// them whom it waits for, and so on, giving each kAnswerSeconds to answer; the first that
  /// does not answer is stopped, hung or lost (explainWait). Processes that wait answer from
  /// their polling loops; one that is stuck outside the communicator cannot. Where another
  /// process's verdict comes meanwhile, it goes to `verdict` and the investigation stops.
  std::string investigate(const std::vector<uint32_t> &direct, std::string &verdict);
  /// Tells every other process why this one ends the job, so that all of them say the same
  /// (a stopped process, resumed as the launcher takes the job down, would otherwise give
  /// answers that read as a deadlock); waits a moment for the messages to leave.
  void announce(const std::string &verdict);
  /// Another process's verdict (announce), if one has come.
  bool takeVerdict(std::string &verdict);

  // The collectives (MpiCollectives.cpp).
  bool execute(const CommOp &op, std::string &error) override;
  /// Member j's share [lo, hi) of n elements, as LocalCommunicator cuts them.
  static int64_t cut(int64_t n, uint32_t j, uint32_t ways) { return n * j / ways; }
  bool allReduce(const CommOp &op, const CommGroup &g, const std::string &what, std::string &error);
  /// x [outer, ways, chunk] -> the [outer, chunk] pieces of column j, contiguous.
  static std::vector<char> column(const CommOp &op, uint32_t j, uint32_t ways);
  bool reduceScatter(const CommOp &op, const CommGroup &g, const std::string &what,
                     std::string &error);
  /// AllGather (y[o, r] = x of r [o]) and AllToAll (y[o, r] = x of r [o, me]): moves bits.
  bool gatherOrExchange(const CommOp &op, const CommGroup &g, const std::string &what,
                        std::string &error);
  bool broadcast(const CommOp &op, const CommGroup &g, const std::string &what, std::string &error);

  // Point-to-point (MpiPointToPoint.cpp).
  /// The MPI tag of point-to-point `op`; -1 with the reason if `op` names no other rank or
  /// its tag does not fit.
  int checkedTag(const CommOp &op, const std::string &what, std::string &error) const;
  bool pointToPoint(const CommOp &op, const std::string &what, std::string &error);
  /// An exchange's sends are synchronous (done only once their receives have started) and
  /// not copied, as NCCL's: a pipeline's exchanges run on the CPU as they must on GPUs, so a
  /// schedule that would deadlock over NCCL deadlocks here too rather than only there.
  bool executeExchange(const std::vector<CommOp> &ops, std::string &error) override;
  /// Forgets the buffered sends that have completed.
  void reapSends();

  uint32_t rank_, size_;
  MPI_Comm control_; ///< A duplicate of the world's, for the questions of investigate().
  const int32_t rankId_ = static_cast<int32_t>(rank_); ///< What a question sends.
  std::string verdict_; ///< What announce() sends, kept while it is sent.
  std::list<PendingSend> sends_;
  std::list<Answer> answers_;
};

} // namespace tessel::rt::mpi::detail

#endif // TESSEL_RUNTIME_COMM_MPICOMMUNICATORIMPL_H
