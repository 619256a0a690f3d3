//===- NcclCommunicator.h - Ranks as one GPU per MPI process ----*- C++ -*-===//
//
// The communicator of the CUDA backend's multi-GPU runs, as issue 16 designs it: one process
// per GPU started by mpirun, NCCL's unique id handed from rank 0 to the others over MPI, one
// sub-communicator per mesh-axis group split from the world with ncclCommSplit, and every
// operation enqueued on the CUDA stream it is given (the device's communication stream), its
// ticket a CUDA event recorded after it.
//
// Status: compiled where CMake finds NCCL, MPI and the CUDA toolkit (library TesselNccl), but
// not linked into the runner and never run: no GPU has been available. What remains before it
// can be: the CUDA device's collective handlers (today a plan of several ranks is refused on
// the CUDA device at load), the runner's choice of this communicator under mpirun with
// --device cuda, and tests on two GPUs. Unlike LocalCommunicator and MpiCommunicator, NCCL's
// sums do not add in group-index order, so the bits differ from theirs (not the values beyond
// f32 rounding); and NCCL pairs sends with receives by order, not by tag, so a plan's sends
// between two ranks must be issued in the order of their receives.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define TESSEL_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt::nccl {

class NcclCommunicator : public Communicator {
public:
  /// This process's end of the world (rank = MPI process rank), on CUDA device `device`. MPI
  /// must be initialised; every process calls it at the same point. Null with the reason.
  static std::unique_ptr<NcclCommunicator> create(int device, std::string &error);
  ~NcclCommunicator() override;

  /// Splits one sub-communicator per group: every rank of the world calls this with its own
  /// instance of the same groups in the same order (one per mesh axis), since ncclCommSplit is
  /// collective over the world. The instance is named by its first member (color), the rank by
  /// its index in it (key). False with the reason.
  bool addGroups(const std::vector<CommGroup> &groups, std::string &error);

  /// The stream later operations are enqueued on (the device's communication stream, made to
  /// wait for the kernels that produce their inputs).
  void setStream(cudaStream_t stream) { stream_ = stream; }

  uint32_t rank() const override { return rank_; }
  uint32_t worldSize() const override { return size_; }
  /// Enqueues `op` on the stream and records an event after it; x and y are device addresses.
  Ticket start(const CommOp &op) override;
  /// Waits for the ticket's event on the host, then asks NCCL for an asynchronous error.
  bool wait(Ticket ticket, std::string &error) override;
  /// Aborts every NCCL communicator of this process; peers see their operations fail.
  void abort(const std::string &reason) override;
  bool aborted(std::string *reason = nullptr) const override;
  /// NCCL has no notion of a rank that stopped running: a no-op.
  void setRunning(bool) override {}

  struct Comms;

private:
  NcclCommunicator(int device, uint32_t rank, uint32_t size);
  /// Enqueues `op`; false with the reason.
  bool enqueue(const CommOp &op, std::string &error);
  /// `bytes` of device memory for repacking, grown as needed (after the stream drains).
  void *staging(size_t bytes, int which, std::string &error);

  int device_;
  uint32_t rank_, size_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Comms> comms_;
  std::map<Ticket, cudaEvent_t> events_;
  std::map<Ticket, std::string> failures_;
  Ticket next_ = 1;
  void *staging_[2] = {nullptr, nullptr};
  size_t stagingBytes_[2] = {0, 0};
  std::string abortReason_;
};

} // namespace tessel::rt::nccl

#endif // TESSEL_RUNTIME_COMM_NCCLCOMMUNICATOR_H
