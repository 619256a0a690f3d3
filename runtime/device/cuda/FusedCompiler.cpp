//===- FusedCompiler.cpp - Fused elementwise bodies to cubins -------------===//

#include "runtime/device/cuda/FusedCompiler.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "runtime/support/AtomicFile.h"

#include "kernels/cuda/FusedSource.h"

#include <chrono>

namespace tessel::rt {

// No contraction of a multiply and an add into an FMA: the interpreter and the unfused kernels
// (kernels/cuda/CMakeLists.txt compiles them with -fmad=false too) round each product, so the
// generated kernel gives their bits, and the CPU's (whose baseline x86-64 code has no FMA).
const std::vector<std::string> &fusedKernelOptions() {
  static const std::vector<std::string> options = {"--std=c++17", "--fmad=false"};
  return options;
}

std::string smArch(int major, int minor) {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

bool fusedCallSource(const KernelCall &call, const args::FusedElementwise &a, std::string &source,
                     std::string &error) {
  cuda::FusedLayout layout = cuda::fusedLayout(a.shape, a.strides);
  for (const planfile::BufferRef &b : call.instr->inputs)
    layout.inTypes.push_back(operandTypeOf(b.dtype));
  for (const planfile::BufferRef &b : call.instr->outputs)
    layout.outTypes.push_back(operandTypeOf(b.dtype));
  return cuda::fusedKernelSource(a.steps, layout, a.outSteps, source, error);
}

FusedCompiler *processFusedCompiler(std::string &error) {
  static std::once_flag once;
  static FusedCompiler *compiler = nullptr;
  static std::string why;
  std::call_once(once, [] {
    if (const Nvrtc *nvrtc = loadNvrtc(why))
      compiler = new FusedCompiler(*nvrtc, KernelCache(defaultKernelCacheDir()));
  });
  if (!compiler)
    error = why;
  return compiler;
}

FusedCompiler::FusedCompiler(const Nvrtc &nvrtc, KernelCache cache)
    : nvrtc_(nvrtc), cache_(std::move(cache)) {
  if (!cache_.dir().empty())
    removeStaleTemporaries(cache_.dir());
}

bool FusedCompiler::compile(const std::string &source, const std::string &arch, Result &result,
                            std::string &warning, std::string &error) {
  const std::string key = kernelCacheKey(source, fusedKernelOptions(), arch, nvrtc_.version());
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = made_.find(key); it != made_.end()) {
    result = *it->second;
    result.fromCache = true;
    result.recompiled = false;
    result.seconds = 0;
    return true;
  }
  Result r;
  const KernelCache::Lookup found = cache_.get(key, r.cubin);
  if (found == KernelCache::Lookup::Hit) {
    r.fromCache = true;
    ++cached_;
  } else {
    r.recompiled = found == KernelCache::Lookup::Corrupt;
    std::string log;
    const auto start = std::chrono::steady_clock::now();
    const bool ok = nvrtc_.compile(source, std::string(cuda::kFusedKernelName) + ".cu", arch,
                                   fusedKernelOptions(), r.cubin, log);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds_ += r.seconds;
    if (!ok) {
      error = "NVRTC " + nvrtc_.version() + " cannot compile the kernel for " + arch + ": " + log;
      return false;
    }
    std::string why;
    if (!cache_.put(key, r.cubin, why))
      warning = "the kernel cache keeps nothing: " + why;
  }
  ++kernels_;
  made_[key] = std::make_shared<Result>(r);
  result = std::move(r);
  return true;
}

} // namespace tessel::rt
