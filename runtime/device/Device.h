//===- Device.h - What the executor asks of a device -------------*- C++ -*-===//
//
// The executor never touches memory itself: it allocates buffers on a device, moves bytes
// between the host and those buffers through the device, and launches each instruction as the
// device's kernel for its catalogue entry on one of the device's streams. The CPU device
// (device/cpu) implements this over host memory, OpenBLAS and OpenMP; the CUDA device
// (device/cuda) implements the same interface over GPU memory and streams, without changes to
// the executor.
//
// Addresses a device hands out (DeviceBuffer::address) are in the device's address space: the
// executor computes operand addresses from them (base + offset) and gives them to kernels and
// communicators, which belong to the same device, but never reads or writes through them.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_DEVICE_H
#define TESSEL_RUNTIME_DEVICE_DEVICE_H

#include "runtime/device/KernelCall.h"

#include "common/catalogue/KernelCatalogue.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

/// A block of device memory, freed with the object.
class DeviceBuffer {
public:
  virtual ~DeviceBuffer() = default;
  /// Where the buffer starts, in the device's address space.
  virtual void *address() const = 0;
  virtual uint64_t bytes() const = 0;
};

/// A point in a stream's work: done once everything launched on the stream before it is.
struct DeviceEvent {
  uint32_t stream = 0;
  uint64_t sequence = 0;
};

class Device {
public:
  virtual ~Device() = default;

  /// "cpu", "cuda:0", ...
  virtual std::string name() const = 0;
  /// The hardware as its vendor names it ("NVIDIA H100 80GB HBM3"); the runner looks its peak
  /// up by this (common/cluster/AcceleratorPeaks.h). The CPU device answers "cpu".
  virtual std::string model() const { return name(); }
  /// Bytes of the device's memory in use (by every process) and in all; false where the
  /// device does not say (the CPU device: host memory is the process's business).
  virtual bool memoryInUse(uint64_t & /*used*/, uint64_t & /*total*/) const { return false; }

  /// Whether this device's buffers are host memory the host may read in place (the CPU's),
  /// once the device is synchronized.
  virtual bool addressesHostMemory() const { return false; }

  /// `bytes` of zeroed memory (at least one byte's worth of address); null with the reason.
  virtual std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes, std::string &error) = 0;

  /// Host to device and back; `device` is an address inside a buffer of this device. Both wait
  /// for the work launched before them on every stream, and are done when they return.
  virtual void upload(void *device, const void *host, uint64_t bytes) = 0;
  virtual void download(void *host, const void *device, uint64_t bytes) = 0;

  /// The device's launch of `kernel` for operands of these element types; null, with the
  /// reason, where the device does not run that combination.
  virtual KernelFn kernel(const catalogue::KernelInfo &kernel,
                          const std::vector<planfile::DType> &ins,
                          const std::vector<planfile::DType> &outs, std::string &error) = 0;

  /// Called once per instruction when a plan is loaded, after the call's arguments are checked
  /// (KernelArgs.h): where a device refuses a call beyond its own limits (false, with the
  /// reason in call.error: the CUDA attention kernels' largest head), or makes code for it
  /// ahead of its launches (the CUDA device compiles fused elementwise bodies with NVRTC). The
  /// default accepts every call.
  virtual bool prepare(KernelCall & /*call*/, const KernelArgs & /*args*/) { return true; }
  /// The streams the device runs at once; an instruction's `stream` must be below it.
  virtual uint32_t streams() const = 0;
  /// Launches `fn` on `stream`, after what was launched there before. False, with the reason
  /// in call.error, where the kernel failed (a device that runs launches later reports a
  /// failure at the next synchronize).
  virtual bool launch(uint32_t stream, KernelFn fn, KernelCall &call, const KernelArgs &args) = 0;
  /// Marks the current end of `stream`; `waitFor` makes another stream wait for it.
  virtual DeviceEvent record(uint32_t stream) = 0;
  virtual void waitFor(uint32_t stream, const DeviceEvent &event) = 0;
  /// Waits for every stream; false with the first failure's reason.
  virtual bool synchronize(std::string &error) = 0;

  /// Kernel timing (--profile) on a device whose launches return before their kernels run: a
  /// timer started on `stream` right before a launch and stopped right after it measures, on
  /// the device, the kernels that launch ran. startTimer answers -1 where the device has no
  /// timers (the CPU device: a launch is done when it returns, and the host clock times it);
  /// timerSeconds reads a stopped timer once the device has synchronized, and frees it.
  virtual int64_t startTimer(uint32_t /*stream*/) { return -1; }
  virtual void stopTimer(int64_t /*timer*/, uint32_t /*stream*/) {}
  virtual double timerSeconds(int64_t /*timer*/) { return 0; }
  /// For a trace (--trace): the seconds from the start of timer `origin` to the start of
  /// `timer`, both stopped and not yet read, once the device has synchronized.
  virtual double timerOffsetSeconds(int64_t /*origin*/, int64_t /*timer*/) { return 0; }

  /// How collectives reach this device's buffers (CommMemory.h): the communicator between the
  /// ranks of this process, and the collective kernels' own copies. Host memory by default.
  virtual CommMemory &commMemory() { return hostMemory(); }
};

/// The CPU device: host memory, the kernels of kernels/cpu, one stream that runs each launch
/// before returning.
std::unique_ptr<Device> createCpuDevice();

/// CUDA GPU `ordinal` (device/cuda); null with the reason where there is none: a runtime built
/// without the CUDA toolkit, no driver, the toolkit's stub driver, no GPU, or no such ordinal.
std::unique_ptr<Device> createCudaDevice(int ordinal, std::string &error);
/// How many CUDA GPUs this process sees; 0, with the reason, where it sees none (for the same
/// reasons as createCudaDevice).
int cudaDeviceCount(std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_DEVICE_H
