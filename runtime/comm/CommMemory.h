//===- CommMemory.h - How collectives reach a rank's memory ------*- C++ -*-===//
//
// The ranks of a LocalCommunicator share one process, and each collective reads its peers'
// buffers in place. Where those buffers are depends on the rank's device: host memory on the
// CPU device, a GPU's memory on the CUDA device (ranks as threads sharing one GPU). A
// CommMemory is that difference: how bytes are copied, how a reduction combines two buffers,
// where a round's result or a buffered message is kept, and when the work is done. The
// collective kernels' own local copies (a group of one, a head-tail reordering) use it too.
//
// Every implementation combines as reduceInto does (into f32, one element at a time, in the
// order the communicator calls it) and converts as widenInto and narrowInto do, so a run gives
// the same bits on either memory.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_COMM_COMMMEMORY_H
#define TESSEL_RUNTIME_COMM_COMMMEMORY_H

#include "runtime/comm/Communicator.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tessel::rt {

class CommMemory {
public:
  virtual ~CommMemory() = default;
  /// Copies `bytes` from `from` to `to`: addresses of any rank of this process, or host memory.
  /// May return before the copy is done (see finish).
  virtual void copy(void *to, const void *from, size_t bytes) = 0;
  /// acc[i] = acc[i] (op) x[i] for i < n, as reduceInto: acc (f32) in this memory, x (of
  /// `type`) in any rank's.
  virtual void reduce(ReduceOp op, float *acc, const void *x, planfile::DType type, int64_t n) = 0;
  /// to = from widened to f32, as widenInto; each in any rank's memory (a round's sums are in
  /// the memory of the member that completed it). For f32, a copy.
  virtual void widen(float *to, const void *from, planfile::DType type, int64_t n) = 0;
  /// to = from rounded to `type`, as narrowInto; each in any rank's memory. For f32, a copy.
  virtual void narrow(void *to, planfile::DType type, const float *from, int64_t n) = 0;
  /// `bytes` of this memory that every rank of the process may read, freed with the pointer
  /// (after the copies that use it are finished); null where it cannot be had.
  virtual std::shared_ptr<void> allocate(size_t bytes) = 0;
  /// Waits until the copies and reductions this thread issued are done; false with the reason
  /// where one failed.
  virtual bool finish(std::string &error) = 0;
};

/// Host memory: memcpy, reduceInto, widenInto, narrowInto, malloc; every call is done when it
/// returns.
CommMemory &hostMemory();

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_COMM_COMMMEMORY_H
