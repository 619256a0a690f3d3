//===- CudaPresence.h - Whether the CUDA tests can run here -----*- C++ -*-===//
//
// The kernel tests' one check for a device: each fixture skips with "skipped: no CUDA device"
// and this reason where it is not empty.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_CUDAPRESENCE_H
#define TESSEL_TEST_UNIT_CUDAPRESENCE_H

#include <cuda_runtime_api.h>

#include <string>

namespace tessel::test {

/// Empty where this process can run CUDA kernels, else why not.
inline std::string noCudaDevice() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  return count > 0 ? "" : "the CUDA driver sees no device";
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_CUDAPRESENCE_H
