//===- DeviceArray.h - A host vector's copy in GPU memory -------*- C++ -*-===//
//
// The CUDA kernel tests' device buffers: a copy of a host vector, freed with the object,
// copied back after the device has finished. An empty vector takes no copy (its storage may be
// null), but still a valid pointer.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_DEVICEARRAY_H
#define TESSEL_TEST_UNIT_DEVICEARRAY_H

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace tessel::test {

template <class T> class DeviceArray {
public:
  explicit DeviceArray(const std::vector<T> &host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, std::max<size_t>(n_, 1) * sizeof(T)), cudaSuccess);
    if (n_) {
      EXPECT_EQ(cudaMemcpy(data_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  explicit DeviceArray(size_t n) : DeviceArray(std::vector<T>(n, T{})) {}
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  T *get() const { return static_cast<T *>(data_); }
  /// Waits for the device, then copies back.
  std::vector<T> host() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> out(n_);
    if (n_) {
      EXPECT_EQ(cudaMemcpy(out.data(), data_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return out;
  }

private:
  void *data_ = nullptr;
  size_t n_;
};

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_DEVICEARRAY_H
