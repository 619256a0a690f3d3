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

void CudaCommMemory::reduce(ReduceOp op, float *y, const float *x, int64_t n) {
  if (n <= 0)
    return;
  note(cudaSetDevice(ordinal_));
  cudaPointerAttributes where{};
  std::shared_ptr<void> staged;
  if (cudaPointerGetAttributes(&where, x) != cudaSuccess || where.type != cudaMemoryTypeDevice ||
      where.device != ordinal_) {
    cudaGetLastError();
    // Another GPU's buffer (or the host's): copied here first, since a kernel reads only its own.
    staged = allocate(static_cast<size_t>(n) * sizeof(float));
    if (!staged) {
      note(cudaErrorMemoryAllocation);
      return;
    }
    copy(staged.get(), x, static_cast<size_t>(n) * sizeof(float));
    x = static_cast<const float *>(staged.get());
  }
  note(cuda::combine(op == ReduceOp::Max, n, y, x, cudaStreamPerThread));
  // `staged` goes back to the pool in stream order, after the kernel that reads it.
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
