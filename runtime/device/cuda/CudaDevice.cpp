//===- CudaDevice.cpp - The device that is one CUDA GPU -------------------===//
//
// Buffers are cudaMalloc allocations; the device runs kStreams non-blocking streams, events
// are CUDA events, and launches return as soon as the work is queued: a kernel that faults is
// reported at the next synchronize. Copies to and from the host first wait for every stream,
// then copy and wait for the copy. The launches are in CudaKernelCalls.cpp: every kernel of the
// catalogue has one, on f32 and i32 operands and, for the kernels the catalogue marks
// CudaNative, on 16-bit ones; the others run 16-bit calls between widening copies.
// The device loads cuBLASLt (kernels/cuda/BlasLt.h: opened with dlopen, so that a runner on
// the CPU device never maps it) and creates one handle and, per stream, a workspace of
// cuda::kBlasWorkspaceBytes, so products on different streams never share one; f32 products
// do not use TF32 unless TESSEL_CUDA_TF32=1 is set (results then differ from the CPU's in the
// fourth significant digit).
//
// The collectives and transfers run the communicator's operations (device/CollectiveCalls.h):
// ranks as threads of this process reach each other's buffers through the device's
// CudaCommMemory (copies and a reduction kernel on the GPU), ranks as processes go over NCCL
// (comm/NcclCommunicator.h). Run on an H200 (scripts/gpu-window.sh).
//
// Fused elementwise calls run kernels generated for their bodies and compiled with NVRTC when
// the plan is loaded (prepare; FusedKernels.h), the interpreter kernel where there are none
// (TESSEL_NVRTC=off turns the generated kernels off).
//
// The runtime API is linked statically (cudart_static loads libcuda.so.1 when first called),
// so a binary with this device starts on a machine without a driver or a GPU and only
// createCudaDevice says there is none.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Device.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/CudaCommMemory.h"
#include "runtime/device/cuda/CudaLaunch.h"
#include "runtime/device/cuda/FusedKernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <variant>
#include <vector>

namespace tessel::rt {

namespace {

/// Streams of one device: enough for compute, collectives and copies to overlap.
constexpr uint32_t kStreams = 4;

std::string cudaMessage(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

/// Why there is no usable GPU, in words a user can act on.
std::string noGpu(cudaError_t e) {
  switch (e) {
  case cudaErrorNoDevice:
    return "no GPU: the CUDA driver sees no device";
  case cudaErrorInsufficientDriver:
    return "no GPU: no NVIDIA driver is installed, or it is older than this build's CUDA runtime";
  case cudaErrorStubLibrary:
    return "no GPU: libcuda.so.1 is the toolkit's stub library, not a driver";
  default:
    return "no GPU: " + cudaMessage(e);
  }
}

class CudaBuffer : public DeviceBuffer {
public:
  CudaBuffer(int ordinal, void *data, uint64_t bytes)
      : ordinal_(ordinal), data_(data), bytes_(bytes) {}
  ~CudaBuffer() override {
    cudaSetDevice(ordinal_);
    cudaFree(data_);
  }
  void *address() const override { return data_; }
  uint64_t bytes() const override { return bytes_; }

private:
  int ordinal_;
  void *data_;
  uint64_t bytes_;
};

class CudaDevice : public Device, private CudaLaunch {
public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal), commMemory_(ordinal) {}

  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    for (cudaStream_t s : streams_)
      cudaStreamSynchronize(s);
    for (auto &[sequence, event] : recorded_)
      cudaEventDestroy(event);
    if (collectiveEvent_)
      cudaEventDestroy(collectiveEvent_);
    for (cudaEvent_t event : freeEvents_)
      cudaEventDestroy(event);
    for (const auto &[id, t] : timers_)
      freeTimers_.push_back(t);
    for (const Timer &t : freeTimers_) {
      cudaEventDestroy(t.start);
      cudaEventDestroy(t.stop);
    }
    for (Scratch &s : scratch_)
      cudaFree(s.data);
    for (std::vector<Scratch> &slots : operandScratch_)
      for (Scratch &s : slots)
        cudaFree(s.data);
    cudaFree(idError_);
    for (cuda::BlasContext &b : blas_)
      cudaFree(b.workspace);
    blasPlans_.clear(); // the kept descriptors, before the handle they were used with
    if (blasHandle_)
      blasLt_->cublasLtDestroy(blasHandle_);
    for (cudaStream_t s : streams_)
      cudaStreamDestroy(s);
  }

  /// Creates the streams and the id-error record; false with the reason.
  bool start(std::string &error) {
    cudaError_t e = cudaSetDevice(ordinal_);
    for (uint32_t s = 0; s < kStreams && e == cudaSuccess; ++s) {
      cudaStream_t stream = nullptr;
      e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      if (e == cudaSuccess)
        streams_.push_back(stream);
    }
    if (e == cudaSuccess)
      e = cudaEventCreateWithFlags(&collectiveEvent_, cudaEventDisableTiming);
    if (e == cudaSuccess)
      e = cudaMalloc(reinterpret_cast<void **>(&idError_), sizeof(cuda::IdError));
    if (e == cudaSuccess)
      e = cudaMemset(idError_, 0, sizeof(cuda::IdError));
    if (e == cudaSuccess) {
      const char *tf32 = std::getenv("TESSEL_CUDA_TF32");
      const bool allowTf32 = tf32 && std::strcmp(tf32, "1") == 0;
      blas_.resize(streams_.size());
      blasPlans_.resize(streams_.size());
      for (size_t s = 0; s < blas_.size(); ++s) {
        cuda::BlasContext &b = blas_[s];
        b.plans = &blasPlans_[s];
        b.workspaceBytes = cuda::kBlasWorkspaceBytes;
        b.allowTf32 = allowTf32;
        if (e == cudaSuccess)
          e = cudaMalloc(&b.workspace, b.workspaceBytes);
      }
    }
    if (e == cudaSuccess)
      e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      error = "starting " + name() + ": " + cudaMessage(e);
      return false;
    }
    std::string why;
    blasLt_ = cuda::loadBlasLt(why);
    if (!blasLt_) {
      error = "starting " + name() + ": " + why;
      return false;
    }
    if (cublasStatus_t b = blasLt_->cublasLtCreate(&blasHandle_); b != CUBLAS_STATUS_SUCCESS) {
      blasHandle_ = nullptr;
      error = "starting " + name() + ": cublasLtCreate: " + blasLt_->cublasLtGetStatusString(b);
      return false;
    }
    for (cuda::BlasContext &b : blas_) {
      b.lt = blasLt_;
      b.handle = blasHandle_;
    }
    scratch_.resize(kStreams);
    operandScratch_.resize(kStreams);
    const char *nvrtc = std::getenv("TESSEL_NVRTC");
    if (!nvrtc || std::strcmp(nvrtc, "off") != 0) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ordinal_);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ordinal_);
      fused_ = std::make_unique<FusedKernels>(name(), smArch(major, minor));
    }
    return true;
  }

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  std::string model() const override {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, ordinal_) != cudaSuccess)
      return name();
    return props.name;
  }
  bool memoryInUse(uint64_t &used, uint64_t &total) const override {
    cudaSetDevice(ordinal_);
    size_t free = 0, all = 0;
    if (cudaMemGetInfo(&free, &all) != cudaSuccess)
      return false;
    used = all - free;
    total = all;
    return true;
  }

  std::unique_ptr<DeviceBuffer> allocate(uint64_t bytes, std::string &error) override {
    cudaSetDevice(ordinal_);
    const uint64_t rounded = (bytes + 255) / 256 * 256 + 256;
    void *data = nullptr;
    cudaError_t e = cudaMalloc(&data, rounded);
    if (e == cudaSuccess)
      e = cudaMemset(data, 0, rounded);
    if (e == cudaSuccess)
      e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      cudaFree(data);
      error = "allocating " + std::to_string(bytes) + " bytes on " + name() + ": " + cudaMessage(e);
      return nullptr;
    }
    return std::make_unique<CudaBuffer>(ordinal_, data, bytes);
  }

  void upload(void *device, const void *host, uint64_t bytes) override {
    copy(device, host, bytes, cudaMemcpyHostToDevice, "upload");
  }
  void download(void *host, const void *device, uint64_t bytes) override {
    copy(host, device, bytes, cudaMemcpyDeviceToHost, "download");
  }

  KernelFn kernel(const catalogue::KernelInfo &kernel, const std::vector<planfile::DType> &ins,
                  const std::vector<planfile::DType> &outs, std::string &error) override {
    // 16-bit operands: the catalogue says how (TESSEL_SIXTEEN_BIT): a launch made for them
    // (cudaSixteenBitKernel: the 16-bit products, the memory-bound kernels that take each
    // operand at its type), else the f32 kernel between widening and narrowing copies
    // (CudaWidenedCall.cpp).
    switch (sixteenBitCall(kernel, ins, outs, "cuda", error)) {
    case SixteenBit::Moved:
      return cudaKernel(kernel.id);
    case SixteenBit::Refused:
      return nullptr;
    case SixteenBit::CudaNative:
      if (KernelFn native = cudaSixteenBitKernel(kernel.id, ins, outs))
        return native;
      break;
    case SixteenBit::Widened:
      break;
    }
    return &cudaWidenedCall;
  }

  bool prepare(KernelCall &call, const KernelArgs &args) override {
    if (!cudaAccepts(call, args))
      return false;
    if (fused_ && args.id() == catalogue::KernelId::FusedElementwise) {
      cudaSetDevice(ordinal_);
      fused_->prepare(call, args.as<args::FusedElementwise>());
    }
    return true;
  }

  uint32_t streams() const override { return kStreams; }

  CommMemory &commMemory() override { return commMemory_; }

  bool launch(uint32_t stream, KernelFn fn, KernelCall &call, const KernelArgs &args) override {
    if (fused_ && fused_->reportPending())
      fused_->report();
    cudaSetDevice(ordinal_);
    launching_ = stream % kStreams;
    call.launch = this;
    const bool ok = fn(call, args);
    call.launch = nullptr;
    return ok;
  }

  DeviceEvent record(uint32_t stream) override {
    cudaSetDevice(ordinal_);
    cudaEvent_t event = nullptr;
    if (!freeEvents_.empty()) {
      event = freeEvents_.back();
      freeEvents_.pop_back();
    } else if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
               e != cudaSuccess) {
      fail("creating an event: " + cudaMessage(e));
      return DeviceEvent{stream, 0};
    }
    const uint64_t sequence = ++sequence_;
    if (cudaError_t e = cudaEventRecord(event, streams_[stream % kStreams]); e != cudaSuccess)
      fail("recording an event: " + cudaMessage(e));
    recorded_[sequence] = event;
    return DeviceEvent{stream, sequence};
  }

  void waitFor(uint32_t stream, const DeviceEvent &event) override {
    // An event no longer recorded was passed by a synchronize: nothing is left to wait for.
    auto it = recorded_.find(event.sequence);
    if (it == recorded_.end())
      return;
    cudaSetDevice(ordinal_);
    if (cudaError_t e = cudaStreamWaitEvent(streams_[stream % kStreams], it->second, 0);
        e != cudaSuccess)
      fail("waiting for an event: " + cudaMessage(e));
  }

  bool synchronize(std::string &error) override {
    cudaSetDevice(ordinal_);
    waitForStreams();
    for (auto &[sequence, event] : recorded_)
      freeEvents_.push_back(event);
    recorded_.clear();
    cuda::IdError bad{};
    if (cudaError_t e = cudaMemcpy(&bad, idError_, sizeof bad, cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      fail("reading the kernels' id check: " + cudaMessage(e));
    else if (bad.flag) {
      fail("token id " + std::to_string(bad.id) + " at position " + std::to_string(bad.position) +
           " is outside the vocabulary of " + std::to_string(bad.limit));
      cudaMemset(idError_, 0, sizeof(cuda::IdError));
      cudaDeviceSynchronize();
    }
    if (failure_.empty())
      return true;
    error = failure_;
    failure_.clear();
    return false;
  }

  int64_t startTimer(uint32_t stream) override {
    cudaSetDevice(ordinal_);
    Timer t;
    if (!freeTimers_.empty()) {
      t = freeTimers_.back();
      freeTimers_.pop_back();
    } else if (cudaEventCreate(&t.start) != cudaSuccess || cudaEventCreate(&t.stop) != cudaSuccess) {
      // A run without timings is still a run: this launch goes untimed.
      if (t.start)
        cudaEventDestroy(t.start);
      return -1;
    }
    cudaEventRecord(t.start, streams_[stream % kStreams]);
    const int64_t id = nextTimer_++;
    timers_[id] = t;
    return id;
  }
  void stopTimer(int64_t timer, uint32_t stream) override {
    if (auto it = timers_.find(timer); it != timers_.end())
      cudaEventRecord(it->second.stop, streams_[stream % kStreams]);
  }
  double timerOffsetSeconds(int64_t origin, int64_t timer) override {
    auto from = timers_.find(origin), to = timers_.find(timer);
    float ms = 0;
    if (from == timers_.end() || to == timers_.end() ||
        cudaEventElapsedTime(&ms, from->second.start, to->second.start) != cudaSuccess)
      ms = 0;
    return ms / 1e3;
  }
  double timerSeconds(int64_t timer) override {
    auto it = timers_.find(timer);
    if (it == timers_.end())
      return 0;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, it->second.start, it->second.stop) != cudaSuccess)
      ms = 0;
    freeTimers_.push_back(it->second);
    timers_.erase(it);
    return ms / 1e3;
  }

private:
  struct Scratch {
    void *data = nullptr;
    uint64_t bytes = 0;
  };

  // CudaLaunch, for the handler of the launch in progress.
  cudaStream_t stream() const override { return streams_[launching_]; }
  cuda::IdError *idError() const override { return idError_; }
  const cuda::BlasContext &blas() const override { return blas_[launching_]; }
  cudaEvent_t collectiveEvent() const override { return collectiveEvent_; }
  cudaKernel_t fusedKernel(const planfile::Instr *instr) const override {
    return fused_ ? fused_->find(instr) : nullptr;
  }
  void *scratch(uint64_t bytes, std::string &error) override {
    return grown(scratch_[launching_], bytes, error);
  }
  void *operandScratch(size_t slot, uint64_t bytes, std::string &error) override {
    std::vector<Scratch> &slots = operandScratch_[launching_];
    if (slots.size() <= slot)
      slots.resize(slot + 1);
    return grown(slots[slot], bytes, error);
  }

  /// `s`, at least `bytes` long: grown rarely (the first step), after waiting for the stream's
  /// kernels that still use the old memory.
  void *grown(Scratch &s, uint64_t bytes, std::string &error) {
    if (s.bytes >= bytes && s.data)
      return s.data;
    cudaStreamSynchronize(streams_[launching_]);
    cudaFree(s.data);
    s = Scratch{};
    const uint64_t size = std::max<uint64_t>(bytes, 1 << 20);
    if (cudaError_t e = cudaMalloc(&s.data, size); e != cudaSuccess) {
      s.data = nullptr;
      error = "allocating " + std::to_string(size) + " bytes on " + name() + ": " + cudaMessage(e);
      return nullptr;
    }
    s.bytes = size;
    return s.data;
  }

  /// Keeps the first failure for the next synchronize.
  void fail(const std::string &why) {
    if (failure_.empty())
      failure_ = why;
  }

  void waitForStreams() {
    for (cudaStream_t s : streams_)
      if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess)
        fail("a kernel failed on " + name() + ": " + cudaMessage(e));
  }

  void copy(void *to, const void *from, uint64_t bytes, cudaMemcpyKind kind, const char *what) {
    if (!bytes)
      return;
    cudaSetDevice(ordinal_);
    waitForStreams();
    // On one of the device's streams, then waited for: a plain cudaMemcpy from pageable memory
    // may return before the data has arrived.
    cudaError_t e = cudaMemcpyAsync(to, from, bytes, kind, streams_[0]);
    if (e == cudaSuccess)
      e = cudaStreamSynchronize(streams_[0]);
    if (e != cudaSuccess)
      fail(std::string(what) + " of " + std::to_string(bytes) + " bytes on " + name() + ": " +
           cudaMessage(e));
  }

  int ordinal_;
  CudaCommMemory commMemory_;
  cudaEvent_t collectiveEvent_ = nullptr;
  std::vector<cudaStream_t> streams_;
  std::vector<Scratch> scratch_;
  std::vector<std::vector<Scratch>> operandScratch_; ///< Per stream, per widened operand.
  std::map<uint64_t, cudaEvent_t> recorded_;
  std::vector<cudaEvent_t> freeEvents_;
  /// Kernel timers (startTimer): timing events around one launch, kept for reuse once read.
  struct Timer {
    cudaEvent_t start = nullptr, stop = nullptr;
  };
  std::map<int64_t, Timer> timers_;
  std::vector<Timer> freeTimers_;
  int64_t nextTimer_ = 0;
  cuda::IdError *idError_ = nullptr;
  const cuda::BlasLt *blasLt_ = nullptr; ///< Loaded by start, for the life of the process.
  cublasLtHandle_t blasHandle_ = nullptr;
  std::vector<cuda::BlasContext> blas_;    ///< One per stream, sharing blasHandle_.
  std::vector<cuda::BlasPlans> blasPlans_; ///< One per stream: blas_[s].plans.
  std::unique_ptr<FusedKernels> fused_;    ///< Null with TESSEL_NVRTC=off.
  uint64_t sequence_ = 0;
  uint32_t launching_ = 0;
  std::string failure_;
};

} // namespace


std::unique_ptr<Device> createCudaDevice(int ordinal, std::string &error) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError(); // not sticky: leave no error behind for later calls
    error = noGpu(e);
    return nullptr;
  }
  if (count == 0) {
    error = noGpu(cudaErrorNoDevice);
    return nullptr;
  }
  if (ordinal < 0 || ordinal >= count) {
    error = "there is no CUDA device " + std::to_string(ordinal) + "; this machine has " +
            std::to_string(count);
    return nullptr;
  }
  auto device = std::make_unique<CudaDevice>(ordinal);
  if (!device->start(error))
    return nullptr;
  return device;
}

int cudaDeviceCount(std::string &error) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    error = noGpu(e);
    return 0;
  }
  if (count == 0)
    error = noGpu(cudaErrorNoDevice);
  return count;
}

} // namespace tessel::rt
