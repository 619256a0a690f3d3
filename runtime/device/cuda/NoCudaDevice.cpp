//===- NoCudaDevice.cpp - The CUDA device of a build without CUDA ---------===//
//
// Built in place of CudaDevice.cpp where CMake found no CUDA toolkit: there is no GPU to run
// on, and asking for one says why.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Device.h"

namespace tessel::rt {

namespace {

const char *kWhy = "this runtime was built without CUDA (CMake found no CUDA toolkit, or "
                   "TESSEL_ENABLE_CUDA was OFF)";

} // namespace

std::unique_ptr<Device> createCudaDevice(int ordinal, std::string &error) {
  error = kWhy;
  return nullptr;
}

int cudaDeviceCount(std::string &error) {
  error = kWhy;
  return 0;
}

} // namespace tessel::rt
