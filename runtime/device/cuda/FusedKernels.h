//===- FusedKernels.h - A CUDA device's generated fused kernels --*- C++ -*-===//
//
// When a plan is loaded, the CUDA device hands each `fused_elementwise` call here (prepare):
// its kernel is generated, compiled for the device's architecture (FusedCompiler: from the
// kernel cache where it was compiled before) and loaded with cudaLibraryLoadData, once per
// distinct kernel. At launch the call's handler asks for it (find) and runs the interpreter
// kernel where there is none: a runner without NVRTC, a body NVRTC refuses, or a cubin the
// driver cannot load all fall back, with one warning per device. What was compiled and how
// long it took is printed once per plan load (report).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_FUSEDKERNELS_H
#define TESSEL_RUNTIME_DEVICE_CUDA_FUSEDKERNELS_H

#include "runtime/device/cuda/FusedCompiler.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessel::rt {

class FusedKernels {
public:
  /// For device `deviceName` ("cuda:0") of architecture `arch` ("sm_90").
  FusedKernels(std::string deviceName, std::string arch)
      : deviceName_(std::move(deviceName)), arch_(std::move(arch)) {}
  ~FusedKernels();

  /// Generates, compiles and loads the kernel of call `instr` (decoded as `call`). Where that
  /// fails the call keeps the interpreter; the first failure is printed.
  void prepare(const KernelCall &call, const args::FusedElementwise &a);
  /// The kernel prepared for `instr`, or null.
  cudaKernel_t find(const planfile::Instr *instr) const;
  /// Whether prepare ran since the last report.
  bool reportPending() const { return pending_; }
  /// Prints what prepare did since the last report, in one line on stderr.
  void report();

private:
  void warn(const std::string &why);

  std::string deviceName_, arch_;
  FusedCompiler *compiler_ = nullptr; ///< processFusedCompiler, once found.
  bool unavailable_ = false;          ///< NVRTC could not be opened: every call interprets.
  bool warned_ = false;
  std::atomic<bool> pending_{false};
  int calls_ = 0, interpreted_ = 0; ///< Since the last report.
  mutable std::mutex mutex_;
  std::map<std::string, cudaKernel_t> bySource_;
  std::map<const planfile::Instr *, cudaKernel_t> byInstr_;
  std::vector<cudaLibrary_t> libraries_;
  /// Since the last report: kernels loaded, of them found (in the cache, or compiled by
  /// another device of the process), and the seconds spent compiling the others.
  int loaded_ = 0, found_ = 0;
  double seconds_ = 0;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CUDA_FUSEDKERNELS_H
