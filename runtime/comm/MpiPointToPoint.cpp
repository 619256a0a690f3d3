//===- MpiPointToPoint.cpp - Sends and receives between MPI processes -----===//
//
// A send of the MPI communicator is buffered, as between threads: its data is copied, it never
// waits for its receive, and its buffer goes once the message has left. An exchange (the
// pipeline's) instead posts synchronous sends of the data in place, as NCCL does. A tag travels
// as an MPI tag of its own, apart from the collectives' (mpiTag).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicatorImpl.h"

namespace tessel::rt::mpi::detail {

int MpiCommunicator::checkedTag(const CommOp &op, const std::string &what,
                                std::string &error) const {
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

bool MpiCommunicator::pointToPoint(const CommOp &op, const std::string &what, std::string &error) {
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

bool MpiCommunicator::executeExchange(const std::vector<CommOp> &ops, std::string &error) {
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

void MpiCommunicator::reapSends() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(), &done,
                MPI_STATUSES_IGNORE);
    it = done ? sends_.erase(it) : std::next(it);
  }
}

} // namespace tessel::rt::mpi::detail
