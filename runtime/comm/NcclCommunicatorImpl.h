//===- NcclCommunicatorImpl.h - The NCCL communicator's class ---*- C++ -*-===//
//
// The NCCL communicator is defined in two files by concern: NcclCommunicator.cpp opens NCCL's
// library, joins the world, splits it into the plan's groups and ends or aborts them, and
// NcclOperations.cpp issues the operations on the communicator's stream and waits for them.
// They share this class. Only built where CMake found nccl.h (TESSEL_HAVE_NCCL).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_NCCLCOMMUNICATORIMPL_H
#define TESSEL_RUNTIME_COMM_NCCLCOMMUNICATORIMPL_H

#include "runtime/comm/NcclCommunicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>
#include <string>
#include <vector>

namespace tessel::rt::nccl::detail {

/// The functions of NCCL's library that the communicator calls, opened with dlopen.
#define TESSEL_NCCL_FUNCTIONS(X)                                                                   \
  X(ncclGetUniqueId)                                                                               \
  X(ncclCommInitRank)                                                                              \
  X(ncclCommSplit)                                                                                 \
  X(ncclCommDestroy)                                                                               \
  X(ncclCommAbort)                                                                                 \
  X(ncclCommGetAsyncError)                                                                         \
  X(ncclGetErrorString)                                                                            \
  X(ncclAllReduce)                                                                                 \
  X(ncclBroadcast)                                                                                 \
  X(ncclAllGather)                                                                                 \
  X(ncclReduceScatter)                                                                             \
  X(ncclSend)                                                                                      \
  X(ncclRecv)                                                                                      \
  X(ncclGroupStart)                                                                                \
  X(ncclGroupEnd)

struct Library {
#define TESSEL_NCCL_POINTER(name) decltype(&::name) name = nullptr;
  TESSEL_NCCL_FUNCTIONS(TESSEL_NCCL_POINTER)
#undef TESSEL_NCCL_POINTER
};

inline std::string cudaMessage(const char *what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(const Library &nccl, int device, uint32_t rank, uint32_t size)
      : nccl_(nccl), device_(device), rank_(rank), size_(size) {}
  ~NcclCommunicator() override;

  // Joining the world, and leaving it (NcclCommunicator.cpp).
  /// Joins the world and splits the groups; false with the reason.
  bool start(const IdExchange &exchange, const std::vector<std::optional<CommGroup>> &splits,
             const std::vector<int64_t> &tags, std::string &error);
  uint32_t rank() const override { return rank_; }
  uint32_t worldSize() const override { return size_; }
  void abort(const std::string &reason) override;
  bool aborted(std::string *reason) const override;
  /// NCCL has no notion of a rank that stopped running; a failed process ends the job.
  void setRunning(bool) override {}

  // The operations (NcclOperations.cpp).
  bool orderAfter(void *stream) override;
  Ticket start(const CommOp &op) override;
  /// One NCCL group: every operation is posted before any has to be done.
  Ticket startExchange(const std::vector<CommOp> &ops) override;
  bool wait(Ticket ticket, std::string &error) override;

private:
  /// Waits for `event` within the wait limit, polling (cudaEventSynchronize cannot be given a
  /// deadline). Out of time (cudaErrorNotReady), the communicators are aborted, which ends the
  /// kernels that wait for peers, and `error` says so: NCCL cannot tell which peer is missing.
  cudaError_t finish(cudaEvent_t event, const std::string &what, std::string &error);
  /// The ticket of what `post` enqueues on the stream (false with the reason if it cannot):
  /// an event recorded after it, or the failure, named by `what`, that wait reports.
  template <typename Post> Ticket issue(const std::string &what, Post post);
  /// Enqueues `ops` as one NCCL group on the stream; false with the reason.
  bool group(const std::vector<CommOp> &ops, std::string &error);
  /// Ends an NCCL group whatever was posted in it, or NCCL stays inside it: whether all was
  /// posted and the group ended, with the first error (the posting's before the ending's).
  bool endGroup(bool posted, std::string &error);
  /// `bytes` of device memory for repacking, grown as needed (after the stream drains).
  void *staging(size_t bytes, int which, std::string &error);
  /// Operations on host memory (the host loop sharing outputs between the processes, pipeline
  /// stages passing activations): through the two staging buffers, done when this returns.
  bool runStaged(const CommOp &op, std::string &error);
  /// The communicator of `op`'s group: the world's for all ranks in order, else the split.
  ncclComm_t commOf(const CommOp &op, std::string &error) const;
  /// Enqueues `op` on the stream; false with the reason.
  bool enqueue(const CommOp &op, std::string &error);

  bool check(const char *what, ncclResult_t r, std::string &error) const {
    if (r == ncclSuccess)
      return true;
    error = std::string(what) + ": " + nccl_.ncclGetErrorString(r);
    return false;
  }

  const Library &nccl_;
  int device_;
  uint32_t rank_, size_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr; ///< Recorded on the issuing kernel's stream by orderAfter.
  ncclComm_t world_ = nullptr;
  /// Sub-communicators by their members' world ranks, in group-index order.
  std::map<std::vector<uint32_t>, ncclComm_t> groups_;
  /// Copies of the world for the point-to-point tags named at creation.
  std::map<int64_t, ncclComm_t> tagged_;
  std::map<Ticket, cudaEvent_t> events_;
  std::map<Ticket, std::string> failures_;
  Ticket next_ = 1;
  void *staging_[2] = {nullptr, nullptr};
  size_t stagingBytes_[2] = {0, 0};
  std::string abortReason_, pendingFailure_;
};

} // namespace tessel::rt::nccl::detail

#endif // TESSEL_RUNTIME_COMM_NCCLCOMMUNICATORIMPL_H
