//===- CpuDevice.cpp - The device that is this machine's CPU --------------===//
//
// Buffers are 64-byte aligned host allocations; copies are memcpy; the one stream runs each
// kernel when it is launched, so events are always reached and synchronize has nothing to wait
// for. Kernels compute in f32 (with i32 ids); a plan with 16-bit operands is refused at load.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Device.h"

#include <cstdlib>
#include <cstring>

namespace tessel::rt {

namespace {

class CpuBuffer : public DeviceBuffer {
public:
  CpuBuffer(void *data, uint64_t bytes) : data_(data), bytes_(bytes) {}
  ~CpuBuffer() override { std::free(data_); }
  void *address() const override { return data_; }
  uint64_t bytes() const override { return bytes_; }

private:
  void *data_;
  uint64_t bytes_;
};

class CpuDevice : public Device {
public:
  std::string name() const override { return "cpu"; }

  std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes, std::string &error) override {
    // Rounded up to whole cache lines, and never empty.
    const uint64_t rounded = (bytes + 63) / 64 * 64 + 64;
    void *data = std::aligned_alloc(64, rounded);
    if (!data) {
      error = "out of memory allocating " + std::to_string(bytes) + " bytes";
      return nullptr;
    }
    std::memset(data, 0, rounded);
    return std::make_unique<CpuBuffer>(data, bytes);
  }

  void upload(void *device, const void *host, uint64_t bytes) override {
    if (bytes)
      std::memmove(device, host, bytes);
  }
  void download(void *host, const void *device, uint64_t bytes) override {
    if (bytes)
      std::memmove(host, device, bytes);
  }

  KernelFn kernel(const catalogue::KernelInfo &kernel, const std::vector<planfile::DType> &ins,
                  const std::vector<planfile::DType> &outs, std::string &error) override {
    auto f32Only = [&](const std::vector<planfile::DType> &types, const char *direction) {
      for (size_t k = 0; k < types.size(); ++k)
        if (types[k] == planfile::DType::BF16 || types[k] == planfile::DType::F16) {
          error = std::string(direction) + " " + std::to_string(k) + " is " +
                  planfile::dtypeName(types[k]) +
                  "; the cpu device computes in f32 (compile with precision fp32, or run on a "
                  "device with 16-bit kernels)";
          return false;
        }
      return true;
    };
    if (!f32Only(ins, "input") || !f32Only(outs, "output"))
      return nullptr;
    return cpuKernel(kernel.id);
  }

  uint32_t streams() const override { return 1; }
  bool launch(uint32_t stream, KernelFn fn, KernelCall &call,
              const catalogue::KernelParams &params) override {
    return fn(call, params);
  }
  DeviceEvent record(uint32_t stream) override { return DeviceEvent{stream, ++launched_}; }
  void waitFor(uint32_t stream, const DeviceEvent &event) override {}
  bool synchronize(std::string &error) override { return true; }

private:
  uint64_t launched_ = 0;
};

} // namespace

std::unique_ptr<Device> createCpuDevice() { return std::make_unique<CpuDevice>(); }

} // namespace tessel::rt
