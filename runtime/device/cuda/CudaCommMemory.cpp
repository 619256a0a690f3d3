//===- CudaCommMemory.cpp - Collectives between ranks sharing a GPU -------===//

#include "runtime/device/cuda/CudaCommMemory.h"

#include "kernels/cuda/CudaKernels.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessel::rt {

namespace {

/// The first failure this thread's copies and reductions met since its last finish.
thread_local cudaError_t pending = cudaSuccess;

void note(cudaError_t e) {
  if (e != cudaSuccess && pending == cudaSuccess)
    pending = e;
}

} // namespace

CudaCommMemory::CudaCommMemory(int ordinal) : ordinal_(ordinal) {
  // Keep what the pool has handed out once: every round of a step asks for about as much again.
  cudaMemPool_t pool = nullptr;
  if (cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess) {
    uint64_t keep = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  }
  cudaGetLastError();
}

void CudaCommMemory::copy(void *to, const void *from, size_t bytes) {
  if (bytes == 0 || to == from)
    return;
  note(cudaSetDevice(ordinal_));
  // Default: the addresses say where each side is (this GPU, another, or the host).
  note(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, cudaStreamPerThread));
}

namespace {

/// Whether `p` is memory of GPU `ordinal`, which its kernels can read and write.
bool onDevice(const void *p, int ordinal) {
  cudaPointerAttributes where{};
  if (cudaPointerGetAttributes(&where, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return where.type == cudaMemoryTypeDevice && where.device == ordinal;
}

} // namespace

void CudaCommMemory::reduce(ReduceOp op, float *y, const float *x, int64_t n) {
  if (n <= 0)
    return;
  note(cudaSetDevice(ordinal_));
  // A buffer of another GPU of the process (or the host's) is combined through a copy here,
  // since a kernel reads and writes only its own GPU's memory.
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::shared_ptr<void> stagedX, stagedY;
  if (!onDevice(x, ordinal_)) {
    if (!(stagedX = allocate(bytes)))
      return note(cudaErrorMemoryAllocation);
    copy(stagedX.get(), x, bytes);
    x = static_cast<const float *>(stagedX.get());
  }
  float *into = y;
  if (!onDevice(y, ordinal_)) {
    if (!(stagedY = allocate(bytes)))
      return note(cudaErrorMemoryAllocation);
    into = static_cast<float *>(stagedY.get());
    copy(into, y, bytes);
  }
  note(cuda::combine(op == ReduceOp::Max, n, into, x, cudaStreamPerThread));
  if (into != y)
    copy(y, into, bytes);
  // The staged copies go back to the pool in stream order, after the work that uses them.
}

std::shared_ptr<void> CudaCommMemory::allocate(size_t bytes) {
  note(cudaSetDevice(ordinal_));
  void *p = nullptr;
  cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, cudaStreamPerThread);
  // Other threads' streams use it too: it must exist for them before it is handed out.
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(cudaStreamPerThread);
  if (e != cudaSuccess) {
    note(e);
    return nullptr;
  }
  const int ordinal = ordinal_;
  return std::shared_ptr<void>(p, [ordinal](void *q) {
    // Every use was finished before the last owner let go.
    cudaSetDevice(ordinal);
    cudaFreeAsync(q, cudaStreamPerThread);
  });
}

bool CudaCommMemory::finish(std::string &error) {
  note(cudaSetDevice(ordinal_));
  note(cudaStreamSynchronize(cudaStreamPerThread));
  const cudaError_t e = pending;
  pending = cudaSuccess;
  if (e == cudaSuccess)
    return true;
  error = std::string("a collective's copy on cuda:") + std::to_string(ordinal_) +
          " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return false;
}

} // namespace tessel::rt
