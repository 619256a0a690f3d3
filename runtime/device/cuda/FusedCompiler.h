//===- FusedCompiler.h - Fused elementwise bodies to cubins -----*- C++ -*-===//
//
// What the CUDA device does with each `fused_elementwise` call of a plan it loads, and what
// `tessel-nvrtc` does without a GPU: generate the call's kernel (kernels/cuda/FusedSource.h),
// look its cubin up in the kernel cache, else compile it with NVRTC and store it. Calls with
// the same body and layout share one source, so a plan compiles each distinct kernel once.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_FUSEDCOMPILER_H
#define TESSEL_RUNTIME_DEVICE_CUDA_FUSEDCOMPILER_H

#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/KernelCache.h"
#include "runtime/device/cuda/Nvrtc.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tessel::rt {

/// The NVRTC options of every fused kernel besides the architecture: C++17, and contraction
/// into FMAs inside a step as nvcc does by default for the unfused kernels (FusedSource.cpp
/// keeps steps apart).
const std::vector<std::string> &fusedKernelOptions();

class FusedCompiler;
/// The compiler every CUDA device of this process shares, over the default kernel cache
/// (defaultKernelCacheDir): a kernel is compiled once however many devices load it, and no two
/// threads of the process write one cache entry. Null with the reason where NVRTC cannot be
/// opened.
FusedCompiler *processFusedCompiler(std::string &error);

/// "sm_90" for compute capability 9.0.
std::string smArch(int major, int minor);

/// The generated source of a checked fused_elementwise call, for its operands' element types;
/// false with the reason.
bool fusedCallSource(const KernelCall &call, const args::FusedElementwise &a, std::string &source,
                     std::string &error);

class FusedCompiler {
public:
  /// Also removes the temporary files that writes of killed processes left in the cache.
  FusedCompiler(const Nvrtc &nvrtc, KernelCache cache);

  struct Result {
    std::string cubin;
    bool fromCache = false;  ///< Found in the cache rather than compiled.
    bool recompiled = false; ///< The cache held a corrupt entry, compiled again.
    double seconds = 0;      ///< Spent compiling it now (0 when it was found).
  };
  /// The cubin of `source` for `arch`: the one already made by this compiler (as if found in
  /// the cache), else the cache's, else NVRTC's (then stored; a store that fails is a warning
  /// in `warning`, not an error). False with NVRTC's log. Thread-safe.
  bool compile(const std::string &source, const std::string &arch, Result &result,
               std::string &warning, std::string &error);

  /// Totals since creation: distinct kernels made, of them found in the cache, and the seconds
  /// spent compiling.
  int kernels() const { return kernels_; }
  int cached() const { return cached_; }
  double compileSeconds() const { return seconds_; }
  const KernelCache &cache() const { return cache_; }
  const Nvrtc &nvrtc() const { return nvrtc_; }

private:
  const Nvrtc &nvrtc_;
  KernelCache cache_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Result>> made_; ///< By cache key.
  int kernels_ = 0, cached_ = 0;
  double seconds_ = 0;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CUDA_FUSEDCOMPILER_H
