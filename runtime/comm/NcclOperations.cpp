//===- NcclOperations.cpp - The NCCL communicator's operations ------------===//
//
// Every operation is enqueued on the communicator's own stream, ordered after the kernels that
// made its input (orderAfter), and waited for through an event recorded after it, polled
// within the rank's wait limit. The plan's layouts of all-gather, reduce-scatter and
// all-to-all put the member index in the middle ([outer, ways, chunk]); NCCL's put it first.
// With outer > 1 the operation goes through staging memory, repacked by the CUDA backend's
// strided copy (which moves the bits of any 4-byte element). Operations on host memory go
// through device memory of their own and are done when they are issued.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicatorImpl.h"

#include <chrono>
#include <memory>
#include <thread>

namespace tessel::rt::nccl::detail {

namespace {

/// y = x read as [b, a, chunk] from a dense [a, b, chunk] of `chunkBytes` chunks: swaps the
/// two outer dims, with one strided copy per index of the smaller one (a group's size).
cudaError_t swapOuter(int64_t a, int64_t b, size_t chunkBytes, const void *x, void *y,
                      cudaStream_t stream) {
  const char *from = static_cast<const char *>(x);
  char *to = static_cast<char *>(y);
  const size_t rowA = static_cast<size_t>(a) * chunkBytes,
               rowB = static_cast<size_t>(b) * chunkBytes;
  cudaError_t e = cudaSuccess;
  if (a <= b) {
    // x[i, :] is contiguous; its b chunks go to y[:, i], a row of a chunks apart.
    for (int64_t i = 0; i < a && e == cudaSuccess; ++i)
      e = cudaMemcpy2DAsync(to + i * chunkBytes, rowA, from + i * rowB, chunkBytes, chunkBytes,
                            static_cast<size_t>(b), cudaMemcpyDeviceToDevice, stream);
  } else {
    // y[j, :] is contiguous; its a chunks come from x[:, j], a row of b chunks apart.
    for (int64_t j = 0; j < b && e == cudaSuccess; ++j)
      e = cudaMemcpy2DAsync(to + j * rowA, chunkBytes, from + j * chunkBytes, rowB, chunkBytes,
                            static_cast<size_t>(a), cudaMemcpyDeviceToDevice, stream);
  }
  return e;
}

/// NCCL's type for a reduction's elements.
ncclDataType_t reductionType(planfile::DType t) {
  return t == planfile::DType::BF16  ? ncclBfloat16
         : t == planfile::DType::F16 ? ncclFloat16
                                     : ncclFloat32;
}

/// Whether `p` is host memory (the host loop's), not a GPU's.
bool isHostMemory(const void *p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return a.type == cudaMemoryTypeUnregistered || a.type == cudaMemoryTypeHost;
}

} // namespace

bool NcclCommunicator::orderAfter(void *stream) {
  cudaSetDevice(device_);
  cudaError_t e = cudaEventRecord(ready_, static_cast<cudaStream_t>(stream));
  if (e == cudaSuccess)
    e = cudaStreamWaitEvent(stream_, ready_, 0);
  if (e != cudaSuccess && pendingFailure_.empty())
    pendingFailure_ = cudaMessage("ordering a collective after its kernels", e);
  return true;
}

template <typename Post>
Communicator::Ticket NcclCommunicator::issue(const std::string &what, Post post) {
  cudaSetDevice(device_);
  const Ticket ticket = next_++;
  std::string error = abortReason_.empty() ? pendingFailure_ : abortReason_;
  pendingFailure_.clear();
  if (error.empty() && post(error)) {
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
    error = cudaMessage("recording the operation's event", e);
  }
  failures_[ticket] = what + ": " + error;
  return ticket;
}

Communicator::Ticket NcclCommunicator::start(const CommOp &op) {
  return issue(commKindName(op.kind), [&](std::string &error) {
    const bool onHost = (op.x && isHostMemory(op.x)) || (op.y && isHostMemory(op.y));
    return onHost ? runStaged(op, error) : enqueue(op, error);
  });
}

Communicator::Ticket NcclCommunicator::startExchange(const std::vector<CommOp> &ops) {
  return issue("exchange", [&](std::string &error) { return group(ops, error); });
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
    error = "rank " + std::to_string(rank_) + " waits for operation " + std::to_string(ticket) +
            ", which it never started";
    return false;
  }
  const cudaError_t e = finish(it->second, "operation " + std::to_string(ticket), error);
  cudaEventDestroy(it->second);
  events_.erase(it);
  if (e == cudaErrorNotReady)
    return false;
  if (e != cudaSuccess) {
    error = cudaMessage("a collective failed on the GPU", e);
    return false;
  }
  ncclResult_t asyncError = ncclSuccess;
  if (world_ && nccl_.ncclCommGetAsyncError(world_, &asyncError) == ncclSuccess &&
      asyncError != ncclSuccess) {
    error = std::string("NCCL: ") + nccl_.ncclGetErrorString(asyncError);
    return false;
  }
  return true;
}

cudaError_t NcclCommunicator::finish(cudaEvent_t event, const std::string &what,
                                     std::string &error) {
  const Clock::time_point started = Clock::now(), deadline = deadlineFromNow();
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e != cudaErrorNotReady)
      return e;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      error = "rank " + std::to_string(rank_) + ": " + what +
              " on the GPU: " + describeWait(started) +
              " for its peers (NCCL does not say which: the rank that ran out of time first "
              "in the other ranks' messages, or the one with none, is the one to look at)";
      abort(error);
      return cudaErrorNotReady;
    }
    if (now - started > std::chrono::milliseconds(10))
      std::this_thread::sleep_for(
          std::chrono::microseconds(now - started > std::chrono::seconds(1) ? 1000 : 50));
  }
}

bool NcclCommunicator::group(const std::vector<CommOp> &ops, std::string &error) {
  for (const CommOp &op : ops) {
    if (op.kind != CommOp::Kind::Send && op.kind != CommOp::Kind::Recv) {
      error =
          std::string("an exchange holds a ") + commKindName(op.kind) + ", not a send or receive";
      return false;
    }
    if ((op.x && isHostMemory(op.x)) || (op.y && isHostMemory(op.y))) {
      error = "an exchange of host memory: NCCL moves device memory only";
      return false;
    }
  }
  if (!check("ncclGroupStart", nccl_.ncclGroupStart(), error))
    return false;
  bool posted = true;
  for (const CommOp &op : ops)
    posted = posted && enqueue(op, error);
  return endGroup(posted, error);
}

bool NcclCommunicator::endGroup(bool posted, std::string &error) {
  std::string ending;
  if (!check("ncclGroupEnd", nccl_.ncclGroupEnd(), ending) && posted) {
    error = ending;
    return false;
  }
  return posted;
}

void *NcclCommunicator::staging(size_t bytes, int which, std::string &error) {
  if (stagingBytes_[which] >= bytes)
    return staging_[which];
  cudaStreamSynchronize(stream_); // the old buffer may still be read
  cudaFree(staging_[which]);
  staging_[which] = nullptr;
  stagingBytes_[which] = 0;
  if (cudaError_t e = cudaMalloc(&staging_[which], bytes); e != cudaSuccess) {
    error = cudaMessage("staging memory", e);
    return nullptr;
  }
  stagingBytes_[which] = bytes;
  return staging_[which];
}

bool NcclCommunicator::runStaged(const CommOp &op, std::string &error) {
  const bool gather = op.kind == CommOp::Kind::AllGather;
  const int64_t ways = op.group ? op.group->size() : 1;
  const size_t in = op.kind == CommOp::Kind::Recv ? 0
                    : gather                      ? commBytes(op, op.outer * op.chunk)
                    : op.kind == CommOp::Kind::ReduceScatter || op.kind == CommOp::Kind::AllToAll
                        ? commBytes(op, op.outer * ways * op.chunk)
                        : commBytes(op, op.n);
  const size_t out = op.kind == CommOp::Kind::Send ? 0
                     : gather || op.kind == CommOp::Kind::AllToAll
                         ? commBytes(op, op.outer * ways * op.chunk)
                     : op.kind == CommOp::Kind::ReduceScatter ? commBytes(op, op.outer * op.chunk)
                                                              : commBytes(op, op.n);
  // Memory of the stream's own, apart from the staging buffers the repacking uses.
  auto deviceCopy = [&](size_t bytes, void *&at, std::shared_ptr<void> &owner) {
    if (bytes == 0)
      return true;
    if (cudaError_t e = cudaMallocAsync(&at, bytes, stream_); e != cudaSuccess) {
      error = cudaMessage("staging memory", e);
      return false;
    }
    owner.reset(at, [stream = stream_](void *p) { cudaFreeAsync(p, stream); });
    return true;
  };
  void *x = nullptr, *y = nullptr;
  std::shared_ptr<void> sent, received;
  if (!deviceCopy(in, x, sent) || !deviceCopy(out, y, received))
    return false;
  CommOp staged = op;
  staged.x = x;
  staged.y = y;
  cudaError_t e = in ? cudaMemcpyAsync(x, op.x, in, cudaMemcpyHostToDevice, stream_) : cudaSuccess;
  if (e != cudaSuccess) {
    error = cudaMessage("staging to the GPU", e);
    return false;
  }
  if (!enqueue(staged, error))
    return false;
  if (out)
    e = cudaMemcpyAsync(op.y, y, out, cudaMemcpyDeviceToHost, stream_);
  cudaEvent_t done = nullptr;
  if (e == cudaSuccess)
    e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (e == cudaSuccess && (e = cudaEventRecord(done, stream_)) == cudaSuccess)
    e = finish(done, std::string(commKindName(op.kind)) + " of host memory", error);
  if (done)
    cudaEventDestroy(done);
  if (e == cudaErrorNotReady)
    return false;
  if (e != cudaSuccess) {
    error = cudaMessage("staging from the GPU", e);
    return false;
  }
  return true;
}

ncclComm_t NcclCommunicator::commOf(const CommOp &op, std::string &error) const {
  if (op.kind == CommOp::Kind::Send || op.kind == CommOp::Kind::Recv) {
    auto it = tagged_.find(op.tag);
    return it == tagged_.end() ? world_ : it->second;
  }
  if (!op.group) {
    error = "no group";
    return nullptr;
  }
  if (auto it = groups_.find(op.group->ranks); it != groups_.end())
    return it->second;
  bool world = op.group->size() == size_;
  for (uint32_t i = 0; world && i < size_; ++i)
    world = op.group->ranks[i] == i;
  if (world)
    return world_;
  error = std::string(commKindName(op.kind)) + " over ranks " + rankList(op.group->ranks) +
          ", which no split of the world made: the NCCL communicator has no communicator "
          "for it";
  return nullptr;
}

bool NcclCommunicator::enqueue(const CommOp &op, std::string &error) {
  if (abortReason_.size()) {
    error = abortReason_;
    return false;
  }
  ncclComm_t comm = commOf(op, error);
  if (!comm)
    return false;
  const int64_t ways = op.group ? op.group->size() : 1;
  auto copied = [&](cudaError_t e) {
    if (e != cudaSuccess)
      error = cudaMessage("repacking", e);
    return e == cudaSuccess;
  };
  // Reductions count elements of their type; moves count bytes, whatever the type.
  const size_t block = static_cast<size_t>(op.outer * op.chunk);
  const size_t blockBytes = commBytes(op, op.outer * op.chunk);
  const size_t chunkBytes = commBytes(op, op.chunk);
  switch (op.kind) {
  case CommOp::Kind::AllReduce:
    return check("ncclAllReduce",
                 nccl_.ncclAllReduce(op.x, op.y, static_cast<size_t>(op.n), reductionType(op.type),
                                     op.reduce == ReduceOp::Max ? ncclMax : ncclSum, comm, stream_),
                 error);
  case CommOp::Kind::Broadcast:
    return check("ncclBroadcast",
                 nccl_.ncclBroadcast(op.x, op.y, commBytes(op, op.n), ncclUint8,
                                     static_cast<int>(op.root), comm, stream_),
                 error);
  case CommOp::Kind::AllGather: {
    if (op.outer == 1)
      return check("ncclAllGather",
                   nccl_.ncclAllGather(op.x, op.y, blockBytes, ncclUint8, comm, stream_), error);
    void *gathered = staging(blockBytes * ways, 0, error);
    return gathered &&
           check("ncclAllGather",
                 nccl_.ncclAllGather(op.x, gathered, blockBytes, ncclUint8, comm, stream_),
                 error) &&
           copied(swapOuter(ways, op.outer, chunkBytes, gathered, op.y, stream_));
  }
  case CommOp::Kind::ReduceScatter: {
    const ncclDataType_t type = reductionType(op.type);
    if (op.outer == 1)
      return check("ncclReduceScatter",
                   nccl_.ncclReduceScatter(op.x, op.y, block, type, ncclSum, comm, stream_), error);
    void *packed = staging(blockBytes * ways, 0, error);
    return packed && copied(swapOuter(op.outer, ways, chunkBytes, op.x, packed, stream_)) &&
           check("ncclReduceScatter",
                 nccl_.ncclReduceScatter(packed, op.y, block, type, ncclSum, comm, stream_), error);
  }
  case CommOp::Kind::AllToAll: {
    const void *send = op.x;
    void *receive = op.y;
    if (op.outer > 1) {
      void *packed = staging(blockBytes * ways, 0, error);
      receive = packed ? staging(blockBytes * ways, 1, error) : nullptr;
      if (!receive || !copied(swapOuter(op.outer, ways, chunkBytes, op.x, packed, stream_)))
        return false;
      send = packed;
    }
    if (!check("ncclGroupStart", nccl_.ncclGroupStart(), error))
      return false;
    bool posted = true;
    for (int64_t r = 0; posted && r < ways; ++r) {
      const size_t at = static_cast<size_t>(r) * blockBytes;
      posted = check("ncclSend",
                     nccl_.ncclSend(static_cast<const char *>(send) + at, blockBytes, ncclUint8,
                                    static_cast<int>(r), comm, stream_),
                     error) &&
               check("ncclRecv",
                     nccl_.ncclRecv(static_cast<char *>(receive) + at, blockBytes, ncclUint8,
                                    static_cast<int>(r), comm, stream_),
                     error);
    }
    if (!endGroup(posted, error))
      return false;
    return op.outer == 1 || copied(swapOuter(ways, op.outer, chunkBytes, receive, op.y, stream_));
  }
  case CommOp::Kind::Send:
    return check("ncclSend",
                 nccl_.ncclSend(op.x, commBytes(op, op.n), ncclUint8, static_cast<int>(op.peer),
                                comm, stream_),
                 error);
  case CommOp::Kind::Recv:
    return check("ncclRecv",
                 nccl_.ncclRecv(op.y, commBytes(op, op.n), ncclUint8, static_cast<int>(op.peer),
                                comm, stream_),
                 error);
  }
  error = "an unknown operation";
  return false;
}

} // namespace tessel::rt::nccl::detail
