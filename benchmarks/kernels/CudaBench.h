//===- CudaBench.h - What the CUDA rate tools share -------------*- C++ -*-===//
//
// Random device inputs and a best-of-N timer with CUDA events. A failure ends the tool with
// its name in the message: a rate measured around a failed launch would be meaningless.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_BENCHMARKS_KERNELS_CUDABENCH_H
#define TESSEL_BENCHMARKS_KERNELS_CUDABENCH_H

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace tessel::bench {

/// Device memory of n floats, random normal values.
inline float *randomDevice(const char *tool, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> host(static_cast<size_t>(n));
  for (float &x : host)
    x = d(rng);
  float *p = nullptr;
  if (cudaMalloc(reinterpret_cast<void **>(&p), host.size() * sizeof(float)) != cudaSuccess ||
      cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice) !=
          cudaSuccess) {
    std::fprintf(stderr, "%s: cannot allocate %lld floats\n", tool, static_cast<long long>(n));
    std::exit(1);
  }
  return p;
}

/// The best milliseconds of `f` (which queues work on the default stream) over `repeats`,
/// after one warm-up run.
template <class F> float bestMs(const char *tool, F f, int repeats) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  f();
  float best = 1e30f;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    f();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", tool, cudaGetErrorString(e));
    std::exit(1);
  }
  return best;
}

} // namespace tessel::bench

#endif // TESSEL_BENCHMARKS_KERNELS_CUDABENCH_H
