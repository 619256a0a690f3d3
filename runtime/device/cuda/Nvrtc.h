//===- Nvrtc.h - NVRTC, opened at run time ----------------------*- C++ -*-===//
//
// The CUDA device compiles the fused elementwise kernels of a plan with NVRTC when it loads
// the plan (FusedKernels.h). NVRTC is opened with dlopen, like cuBLASLt: `libnvrtc.so.13`
// (or `libnvrtc.so`) where the loader finds it, else in the lib64 of the toolkit this runtime
// was built with; a runner on a machine without it still starts, and the fused calls run on
// the interpreter kernel. Compiling needs no GPU.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_NVRTC_H
#define TESSEL_RUNTIME_DEVICE_CUDA_NVRTC_H

#include <string>
#include <vector>

namespace tessel::rt {

class Nvrtc {
public:
  virtual ~Nvrtc() = default;
  /// "13.0": part of every cache key, since another NVRTC may compile the same source to
  /// other code.
  virtual std::string version() const = 0;
  /// Compiles `source` (named `name` in messages) for `arch` ("sm_90") with `options` and
  /// returns the cubin. False with NVRTC's log (or its error) in `log`.
  virtual bool compile(const std::string &source, const std::string &name, const std::string &arch,
                       const std::vector<std::string> &options, std::string &cubin,
                       std::string &log) const = 0;
};

/// NVRTC, opened once per process and kept open; null with the reason where it cannot be
/// opened (every later call gives the same answer).
const Nvrtc *loadNvrtc(std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CUDA_NVRTC_H
