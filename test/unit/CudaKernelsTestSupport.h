//===- CudaKernelsTestSupport.h - CUDA kernel tests' fixture ----*- C++ -*-===//
//
// What the Cuda*KernelsTest.cpp files share: the CudaKernels fixture, which skips every test
// with "skipped: no CUDA device" and the reason where there is none and makes cuBLASLt on first
// use, and the comparison of the GPU's values with the CPU's. The fixture is one class for
// every file (not one per file), as GoogleTest wants of the tests of one suite.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_CUDAKERNELSTESTSUPPORT_H
#define TESSEL_TEST_UNIT_CUDAKERNELSTESTSUPPORT_H

#include "kernels/cuda/CudaKernels.h"
#include "test/unit/CudaPresence.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <vector>

namespace tessel::test {

using Floats = std::vector<float>;

/// |gpu - cpu| <= atol + rtol |cpu| everywhere (f32: the kernels add in different orders).
inline void expectClose(const Floats &cpuValues, const Floats &gpuValues, const std::string &what,
                        float atol = 1e-5f, float rtol = 1e-4f) {
  ASSERT_EQ(cpuValues.size(), gpuValues.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpuValues.size(); ++i) {
    const float ref = cpuValues[i], got = gpuValues[i];
    // NaN where the CPU has NaN; equal values, infinities of one sign among them.
    if ((std::isnan(ref) && std::isnan(got)) || got == ref)
      continue;
    if (std::fabs(got - ref) <= atol + rtol * std::fabs(ref))
      continue;
    ADD_FAILURE() << what << ": element " << i << " is " << got << " on the GPU, " << ref
                  << " on the CPU";
    if (++reported == 5)
      return;
  }
}

class CudaKernels : public ::testing::Test {
protected:
  void SetUp() override {
    const std::string why = tessel::test::noCudaDevice();
    if (!why.empty())
      GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
  void TearDown() override {
    if (blas_.handle)
      blas_.lt->cublasLtDestroy(blas_.handle);
    cudaFree(blas_.workspace);
  }
  /// cuBLASLt, a handle and a workspace, as the device makes them, created on first use.
  const cuda::BlasContext &blas() {
    if (!blas_.handle) {
      std::string why;
      blas_.lt = cuda::loadBlasLt(why);
      EXPECT_TRUE(blas_.lt) << why;
      if (!blas_.lt)
        return blas_;
      EXPECT_EQ(blas_.lt->cublasLtCreate(&blas_.handle), CUBLAS_STATUS_SUCCESS);
      blas_.workspaceBytes = cuda::kBlasWorkspaceBytes;
      blas_.plans = &plans_;
      EXPECT_EQ(cudaMalloc(&blas_.workspace, blas_.workspaceBytes), cudaSuccess);
    }
    return blas_;
  }
  cudaStream_t stream = nullptr; // the legacy default stream

private:
  cuda::BlasContext blas_;
  cuda::BlasPlans plans_;
};

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_CUDAKERNELSTESTSUPPORT_H
