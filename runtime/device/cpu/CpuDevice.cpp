//===- CpuDevice.cpp - The device that is this machine's CPU --------------===//
//
// Buffers are 64-byte aligned host allocations; copies are memcpy; the one stream runs each
// kernel when it is launched, so events are always reached and synchronize has nothing to wait
// for. Kernels compute in f32 (with i32 ids); a compute kernel with bf16 or f16 operands runs
// through the widening wrapper (WidenedCall.h), so mixed-precision plans run here too.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Device.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/cpu/CpuKernelCalls.h"
#include "runtime/device/cpu/WidenedCall.h"

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
  bool addressesHostMemory() const override { return true; }

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
    switch (sixteenBitCall(kernel, ins, outs, "cpu", error)) {
    case SixteenBit::Moved:
      return cpuKernel(kernel.id);
    case SixteenBit::Refused:
      return nullptr;
    case SixteenBit::CudaNative:
    case SixteenBit::Widened:
      break;
    }
    if (kernel.id == catalogue::KernelId::PagedAttention)
      return &widenedPagedAttention;
    return &widenedCall;
  }

  uint32_t streams() const override { return 1; }
  bool launch(uint32_t stream, KernelFn fn, KernelCall &call, const KernelArgs &args) override {
    return fn(call, args);
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
