//===- CudaCommMemory.cpp - Collectives between ranks sharing a GPU -------===//

#include "runtime/device/cuda/CudaCommMemory.h"

#include "runtime/device/HalfOperands.h"

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

/// `p` where a kernel of GPU `ordinal` can read it: itself, or a copy made here (kept alive by
/// `staged`); null where no memory could be had.
const void *readable(CudaCommMemory &mem, int ordinal, const void *p, size_t bytes,
                     std::shared_ptr<void> &staged) {
  if (onDevice(p, ordinal))
    return p;
  if (!(staged = mem.allocate(bytes)))
    return nullptr;
  mem.copy(staged.get(), p, bytes);
  return staged.get();
}

/// Where a kernel of GPU `ordinal` writes `p`'s `bytes`: `p` itself, or a copy made here (kept
/// alive by `staged`; filled from `p` first when `adds`, for a kernel that adds into it), which
/// writeBack returns to `p`; null where no memory could be had.
void *writable(CudaCommMemory &mem, int ordinal, void *p, size_t bytes, bool adds,
               std::shared_ptr<void> &staged) {
  if (onDevice(p, ordinal))
    return p;
  if (!(staged = mem.allocate(bytes)))
    return nullptr;
  if (adds)
    mem.copy(staged.get(), p, bytes);
  return staged.get();
}

/// After the kernel: a staged output goes back to where it belongs. The staged copies go back
/// to the pool in stream order, after the work that uses them.
void writeBack(CudaCommMemory &mem, void *p, const void *at, size_t bytes) {
  if (at != p)
    mem.copy(p, at, bytes);
}

} // namespace

// A kernel reads and writes only its own GPU's memory: an operand of another GPU of the process
// (or the host's) is combined or converted through a copy here.

void CudaCommMemory::reduce(ReduceOp op, float *acc, const void *x, planfile::DType type,
                            int64_t n) {
  if (n <= 0)
    return;
  note(cudaSetDevice(ordinal_));
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::shared_ptr<void> stagedX, stagedAcc;
  const void *from =
      readable(*this, ordinal_, x, static_cast<size_t>(n) * planfile::dtypeBytes(type), stagedX);
  void *into = writable(*this, ordinal_, acc, bytes, true, stagedAcc);
  if (!from || !into)
    return note(cudaErrorMemoryAllocation);
  const bool max = op == ReduceOp::Max;
  float *sums = static_cast<float *>(into);
  note(type == planfile::DType::F32
           ? cuda::combine(max, n, sums, static_cast<const float *>(from), cudaStreamPerThread)
           : cuda::combine(max, type, n, sums, static_cast<const uint16_t *>(from),
                           cudaStreamPerThread));
  writeBack(*this, acc, into, bytes);
}

void CudaCommMemory::widen(float *to, const void *from, planfile::DType type, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (n <= 0 || type == planfile::DType::F32)
    return copy(to, from, n > 0 ? bytes : 0);
  note(cudaSetDevice(ordinal_));
  // `to` is a round's sums or this rank's buffer; either may be another GPU's.
  std::shared_ptr<void> stagedFrom, stagedTo;
  const void *x = readable(*this, ordinal_, from, static_cast<size_t>(n) * 2, stagedFrom);
  void *into = writable(*this, ordinal_, to, bytes, false, stagedTo);
  if (!x || !into)
    return note(cudaErrorMemoryAllocation);
  note(cuda::widen(type, n, static_cast<const uint16_t *>(x), static_cast<float *>(into),
                   cudaStreamPerThread));
  writeBack(*this, to, into, bytes);
}

void CudaCommMemory::narrow(void *to, planfile::DType type, const float *from, int64_t n) {
  if (n <= 0 || type == planfile::DType::F32)
    return copy(to, from, n > 0 ? static_cast<size_t>(n) * sizeof(float) : 0);
  note(cudaSetDevice(ordinal_));
  // The sums may be in another GPU's memory (the member that completed the round).
  const size_t bytes = static_cast<size_t>(n) * 2;
  std::shared_ptr<void> stagedFrom, stagedTo;
  const void *x =
      readable(*this, ordinal_, from, static_cast<size_t>(n) * sizeof(float), stagedFrom);
  void *into = writable(*this, ordinal_, to, bytes, false, stagedTo);
  if (!x || !into)
    return note(cudaErrorMemoryAllocation);
  note(cuda::narrow(type, n, static_cast<const float *>(x), static_cast<uint16_t *>(into),
                    cudaStreamPerThread));
  writeBack(*this, to, into, bytes);
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
