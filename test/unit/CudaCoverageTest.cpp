//===- CudaCoverageTest.cpp - Every compute kernel has a CUDA handler -----===//
//
// The CUDA device runs a plan only if it has a handler for each of the plan's compute kernels
// (collectives go to the communicator): a kernel added to the catalogue, or a handler left out
// of the dispatch table, would make every plan calling it fail at load on a GPU. No GPU is
// needed to look the handlers up, so this runs wherever the CUDA toolkit is.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/CudaLaunch.h"

#include "common/KernelCatalogue.h"

#include <gtest/gtest.h>

using namespace tessel;

TEST(CudaCoverage, EveryComputeKernelHasAHandler) {
  int compute = 0;
  for (const catalogue::KernelInfo &k : catalogue::kernels()) {
    if (k.family != catalogue::Family::Compute)
      continue;
    ++compute;
    EXPECT_NE(rt::cudaKernel(k.id), nullptr) << "the cuda device has no handler for " << k.name;
  }
  EXPECT_GE(compute, 40); // the catalogue is read, not an empty list
}
