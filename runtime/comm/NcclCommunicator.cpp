//===- NcclCommunicator.cpp - Ranks as one GPU per MPI process ------------===//
//
// Compiled, never run (see the header). The plan's layouts of all-gather, reduce-scatter and
// all-to-all put the member index in the middle ([outer, ways, chunk]); NCCL's put it first.
// With outer > 1 the operation goes through staging memory, repacked by the CUDA backend's
// strided copy (which moves the bits of any 4-byte element).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicator.h"

#include "kernels/cuda/CudaKernels.h"

#include <mpi.h>
#include <nccl.h>

namespace tessel::rt::nccl {

struct NcclCommunicator::Comms {
  ncclComm_t world = nullptr;
  /// Sub-communicators by their members' world ranks, in group-index order.
  std::map<std::vector<uint32_t>, ncclComm_t> groups;
};

namespace {

std::string ncclMessage(const char *what, ncclResult_t r) {
  return std::string(what) + ": " + ncclGetErrorString(r);
}

/// y = x read as [b, a, chunk] from a dense [a, b, chunk]: swaps the two outer dims.
cudaError_t swapOuter(int64_t a, int64_t b, int64_t chunk, const void *x, void *y,
                      cudaStream_t stream) {
  cuda::Shape shape;
  shape.rank = 3;
  shape.size[0] = b;
  shape.size[1] = a;
  shape.size[2] = chunk;
  cuda::Strides sx;
  sx.stride[0] = chunk;
  sx.stride[1] = b * chunk;
  sx.stride[2] = 1;
  return cuda::stridedCopy(shape, static_cast<const float *>(x), sx, static_cast<float *>(y),
                           stream);
}

} // namespace

NcclCommunicator::NcclCommunicator(int device, uint32_t rank, uint32_t size)
    : device_(device), rank_(rank), size_(size), comms_(std::make_unique<Comms>()) {}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (stream_)
    cudaStreamSynchronize(stream_);
  for (auto &[ticket, event] : events_)
    cudaEventDestroy(event);
  for (void *p : staging_)
    cudaFree(p);
  for (auto &[ranks, comm] : comms_->groups)
    ncclCommDestroy(comm);
  if (comms_->world)
    ncclCommDestroy(comms_->world);
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(int device, std::string &error) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id{};
  if (rank == 0)
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      // The others wait in the broadcast: end the job rather than leave them there.
      error = ncclMessage("ncclGetUniqueId", r);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    error = "handing out NCCL's unique id over MPI failed";
    return nullptr;
  }
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    error = std::string("cudaSetDevice: ") + cudaGetErrorString(e);
    return nullptr;
  }
  std::unique_ptr<NcclCommunicator> c(
      new NcclCommunicator(device, static_cast<uint32_t>(rank), static_cast<uint32_t>(size)));
  if (ncclResult_t r = ncclCommInitRank(&c->comms_->world, size, id, rank); r != ncclSuccess) {
    error = ncclMessage("ncclCommInitRank", r);
    return nullptr;
  }
  return c;
}

bool NcclCommunicator::addGroups(const std::vector<CommGroup> &groups, std::string &error) {
  cudaSetDevice(device_);
  for (const CommGroup &g : groups) {
    if (g.ranks.empty() || g.index >= g.size() || g.ranks[g.index] != rank_) {
      error = "a group that does not hold this rank (" + std::to_string(rank_) + ")";
      return false;
    }
    ncclComm_t sub = nullptr;
    if (ncclResult_t r = ncclCommSplit(comms_->world, static_cast<int>(g.ranks.front()),
                                       static_cast<int>(g.index), &sub, nullptr);
        r != ncclSuccess) {
      error = ncclMessage("ncclCommSplit", r);
      return false;
    }
    comms_->groups[g.ranks] = sub;
  }
  return true;
}

void *NcclCommunicator::staging(size_t bytes, int which, std::string &error) {
  if (stagingBytes_[which] >= bytes)
    return staging_[which];
  cudaStreamSynchronize(stream_); // the old buffer may still be read
  cudaFree(staging_[which]);
  staging_[which] = nullptr;
  stagingBytes_[which] = 0;
  if (cudaError_t e = cudaMalloc(&staging_[which], bytes); e != cudaSuccess) {
    error = std::string("staging memory: ") + cudaGetErrorString(e);
    return nullptr;
  }
  stagingBytes_[which] = bytes;
  return staging_[which];
}

bool NcclCommunicator::enqueue(const CommOp &op, std::string &error) {
  ncclComm_t comm = comms_->world;
  int64_t ways = 1;
  if (op.kind != CommOp::Kind::Send && op.kind != CommOp::Kind::Recv) {
    auto it = op.group ? comms_->groups.find(op.group->ranks) : comms_->groups.end();
    if (it == comms_->groups.end()) {
      error = std::string(commKindName(op.kind)) + " on a group addGroups was not given";
      return false;
    }
    comm = it->second;
    ways = op.group->size();
  }
  auto check = [&](const char *what, ncclResult_t r) {
    if (r != ncclSuccess)
      error = ncclMessage(what, r);
    return r == ncclSuccess;
  };
  auto copied = [&](cudaError_t e) {
    if (e != cudaSuccess)
      error = std::string("repacking: ") + cudaGetErrorString(e);
    return e == cudaSuccess;
  };
  const size_t block = static_cast<size_t>(op.outer * op.chunk);
  switch (op.kind) {
  case CommOp::Kind::AllReduce:
    return check("ncclAllReduce",
                 ncclAllReduce(op.x, op.y, static_cast<size_t>(op.n), ncclFloat32,
                               op.reduce == ReduceOp::Max ? ncclMax : ncclSum, comm, stream_));
  case CommOp::Kind::Broadcast:
    return check("ncclBroadcast", ncclBroadcast(op.x, op.y, static_cast<size_t>(op.n), ncclInt32,
                                                static_cast<int>(op.root), comm, stream_));
  case CommOp::Kind::AllGather: {
    if (op.outer == 1)
      return check("ncclAllGather", ncclAllGather(op.x, op.y, block, ncclInt32, comm, stream_));
    void *gathered = staging(block * ways * 4, 0, error);
    return gathered &&
           check("ncclAllGather", ncclAllGather(op.x, gathered, block, ncclInt32, comm, stream_)) &&
           copied(swapOuter(ways, op.outer, op.chunk, gathered, op.y, stream_));
  }
  case CommOp::Kind::ReduceScatter: {
    if (op.outer == 1)
      return check("ncclReduceScatter",
                   ncclReduceScatter(op.x, op.y, block, ncclFloat32, ncclSum, comm, stream_));
    void *packed = staging(block * ways * 4, 0, error);
    return packed && copied(swapOuter(op.outer, ways, op.chunk, op.x, packed, stream_)) &&
           check("ncclReduceScatter",
                 ncclReduceScatter(packed, op.y, block, ncclFloat32, ncclSum, comm, stream_));
  }
  case CommOp::Kind::AllToAll: {
    const void *send = op.x;
    void *receive = op.y;
    if (op.outer > 1) {
      void *packed = staging(block * ways * 4, 0, error);
      receive = staging(block * ways * 4, 1, error);
      if (!packed || !receive ||
          !copied(swapOuter(op.outer, ways, op.chunk, op.x, packed, stream_)))
        return false;
      send = packed;
    }
    if (!check("ncclGroupStart", ncclGroupStart()))
      return false;
    for (int64_t r = 0; r < ways; ++r) {
      const size_t at = static_cast<size_t>(r) * block * 4;
      ncclSend(static_cast<const char *>(send) + at, block, ncclInt32, static_cast<int>(r), comm,
               stream_);
      ncclRecv(static_cast<char *>(receive) + at, block, ncclInt32, static_cast<int>(r), comm,
               stream_);
    }
    if (!check("ncclGroupEnd", ncclGroupEnd()))
      return false;
    return op.outer == 1 || copied(swapOuter(ways, op.outer, op.chunk, receive, op.y, stream_));
  }
  case CommOp::Kind::Send:
    return check("ncclSend", ncclSend(op.x, static_cast<size_t>(op.n), ncclInt32,
                                      static_cast<int>(op.peer), comm, stream_));
  case CommOp::Kind::Recv:
    return check("ncclRecv", ncclRecv(op.y, static_cast<size_t>(op.n), ncclInt32,
                                      static_cast<int>(op.peer), comm, stream_));
  }
  error = "an unknown operation";
  return false;
}

Communicator::Ticket NcclCommunicator::start(const CommOp &op) {
  cudaSetDevice(device_);
  const Ticket ticket = next_++;
  std::string error;
  if (!abortReason_.empty())
    error = abortReason_;
  else if (enqueue(op, error)) {
    cudaEvent_t event = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (e == cudaSuccess)
      e = cudaEventRecord(event, stream_);
    if (e == cudaSuccess) {
      events_[ticket] = event;
      return ticket;
    }
    if (event)
      cudaEventDestroy(event);
    error = std::string("recording the operation's event: ") + cudaGetErrorString(e);
  }
  failures_[ticket] = std::string(commKindName(op.kind)) + ": " + error;
  return ticket;
}

bool NcclCommunicator::wait(Ticket ticket, std::string &error) {
  cudaSetDevice(device_);
  if (auto f = failures_.find(ticket); f != failures_.end()) {
    error = f->second;
    failures_.erase(f);
    return false;
  }
  auto it = events_.find(ticket);
  if (it == events_.end()) {
    error = "no operation has ticket " + std::to_string(ticket);
    return false;
  }
  const cudaError_t e = cudaEventSynchronize(it->second);
  cudaEventDestroy(it->second);
  events_.erase(it);
  if (e != cudaSuccess) {
    error = std::string("a collective failed on the GPU: ") + cudaGetErrorString(e);
    return false;
  }
  ncclResult_t asyncError = ncclSuccess;
  if (ncclCommGetAsyncError(comms_->world, &asyncError) == ncclSuccess &&
      asyncError != ncclSuccess) {
    error = ncclMessage("NCCL", asyncError);
    return false;
  }
  return true;
}

void NcclCommunicator::abort(const std::string &reason) {
  if (!abortReason_.empty())
    return;
  abortReason_ = reason.empty() ? "aborted" : reason;
  for (auto &[ranks, comm] : comms_->groups)
    ncclCommAbort(comm);
  comms_->groups.clear();
  if (comms_->world)
    ncclCommAbort(comms_->world);
  comms_->world = nullptr;
}

bool NcclCommunicator::aborted(std::string *reason) const {
  if (abortReason_.empty())
    return false;
  if (reason)
    *reason = abortReason_;
  return true;
}

} // namespace tessel::rt::nccl
