//===- FusedKernels.cpp - A CUDA device's generated fused kernels ---------===//

#include "runtime/device/cuda/FusedKernels.h"

#include "kernels/cuda/FusedSource.h"

#include <cstdio>

namespace tessel::rt {

FusedKernels::~FusedKernels() {
  for (cudaLibrary_t library : libraries_)
    cudaLibraryUnload(library);
}

void FusedKernels::warn(const std::string &why) {
  if (warned_)
    return;
  warned_ = true;
  std::fprintf(stderr, "%s: warning: %s; fused elementwise calls run on the interpreter kernel\n",
               deviceName_.c_str(), why.c_str());
}

void FusedKernels::prepare(const KernelCall &call, const args::FusedElementwise &a) {
  const planfile::Instr *instr = call.instr;
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ = true;
  ++calls_;
  ++interpreted_; // until a kernel is loaded below
  if (unavailable_)
    return;
  if (!compiler_) {
    std::string why;
    if (!(compiler_ = processFusedCompiler(why))) {
      unavailable_ = true;
      warn(why);
      return;
    }
  }
  std::string source, error, warning;
  if (!fusedCallSource(call, a, source, error)) {
    warn("a fused body has no generated kernel: " + error);
    return;
  }
  if (auto it = bySource_.find(source); it != bySource_.end()) {
    byInstr_[instr] = it->second;
    --interpreted_;
    return;
  }
  FusedCompiler::Result compiled;
  if (!compiler_->compile(source, arch_, compiled, warning, error)) {
    warn(error);
    return;
  }
  if (!warning.empty())
    std::fprintf(stderr, "%s: warning: %s\n", deviceName_.c_str(), warning.c_str());
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  cudaError_t e = cudaLibraryLoadData(&library, compiled.cubin.data(), nullptr, nullptr, 0, nullptr,
                                      nullptr, 0);
  if (e == cudaSuccess)
    e = cudaLibraryGetKernel(&kernel, library, cuda::kFusedKernelName);
  if (e != cudaSuccess) {
    cudaGetLastError(); // not sticky: leave nothing behind for the next launch
    if (library)
      cudaLibraryUnload(library);
    warn(std::string("loading a kernel compiled for ") + arch_ + ": " + cudaGetErrorName(e) + ": " +
         cudaGetErrorString(e));
    return;
  }
  ++loaded_;
  found_ += compiled.fromCache;
  seconds_ += compiled.seconds;
  libraries_.push_back(library);
  bySource_[source] = kernel;
  byInstr_[instr] = kernel;
  --interpreted_;
}

cudaKernel_t FusedKernels::find(const planfile::Instr *instr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = byInstr_.find(instr);
  return it == byInstr_.end() ? nullptr : it->second;
}

void FusedKernels::report() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_)
    return;
  pending_ = false;
  if (compiler_) {
    const std::string cacheDir = compiler_->cache().dir();
    std::fprintf(stderr,
                 "%s: %d fused elementwise call%s: %d new kernel%s by NVRTC %s for %s (%d compiled "
                 "in %.2f s, %d from the cache%s%s), %d on the interpreter\n",
                 deviceName_.c_str(), calls_, calls_ == 1 ? "" : "s", loaded_,
                 loaded_ == 1 ? "" : "s", compiler_->nvrtc().version().c_str(), arch_.c_str(),
                 loaded_ - found_, seconds_, found_, cacheDir.empty() ? "; no cache" : " in ",
                 cacheDir.c_str(), interpreted_);
  }
  loaded_ = found_ = 0;
  seconds_ = 0;
  calls_ = interpreted_ = 0;
}

} // namespace tessel::rt
