//===- CudaCommMemory.h - Collectives between ranks sharing a GPU -*- C++ -*-===//
//
// Private to device/cuda. The CommMemory of a CUDA device (comm/CommMemory.h): the ranks of a
// process run as threads, each on its own CudaDevice, several sharing one GPU where there are
// more ranks than GPUs, and a LocalCommunicator moves their bytes with device-to-device copies
// and combines them with the collectives' reduction kernel (kernels/cuda/Combine.cu), the bits
// those of the host's. Work is issued on the calling thread's per-thread stream
// (cudaStreamPerThread), so a rank's communication worker and its compute thread never share
// one, and finish waits for that stream. A buffer on another GPU of the process is copied
// before it is combined. Round results and messages come from the GPU's stream-ordered pool,
// which keeps its memory between rounds.
//
// Status: run on an H200, ranks as threads sharing it (CudaCommunicator tests, training layouts).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_CUDACOMMMEMORY_H
#define TESSEL_RUNTIME_DEVICE_CUDA_CUDACOMMMEMORY_H

#include "runtime/comm/CommMemory.h"

namespace tessel::rt {

class CudaCommMemory final : public CommMemory {
public:
  explicit CudaCommMemory(int ordinal);
  void copy(void *to, const void *from, size_t bytes) override;
  void reduce(ReduceOp op, float *acc, const void *x, planfile::DType type, int64_t n) override;
  void widen(float *to, const void *from, planfile::DType type, int64_t n) override;
  void narrow(void *to, planfile::DType type, const float *from, int64_t n) override;
  std::shared_ptr<void> allocate(size_t bytes) override;
  bool finish(std::string &error) override;

private:
  int ordinal_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CUDA_CUDACOMMMEMORY_H
