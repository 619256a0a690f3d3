//===- KernelCall.h - One decoded kernel call -------------------*- C++ -*-===//
//
// The bridge between a plan instruction and a CPU kernel. Each kernel's handler reads its
// parameters, states how many elements each operand must hold, and (unless validating) runs
// the kernel. Validation runs the same handler once at load time, so a parameter that would
// make a kernel read or write outside its buffers is refused before anything runs.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_KERNELCALL_H
#define TESSEL_RUNTIME_KERNELCALL_H

#include "runtime/Executor.h"
#include "runtime/PlanFile.h"

#include <string>
#include <vector>

namespace tessel::rt {

struct KernelCall {
  const planfile::Instr *instr = nullptr;
  std::vector<void *> in, out;
  std::vector<uint64_t> inElements, outElements;
  const StepContext *ctx = nullptr;
  bool validating = false;
  std::string error;

  int64_t i(const char *name);
  double f(const char *name);
  const std::string &s(const char *name);
  const std::vector<int64_t> &v(const char *name);

  float *fin(size_t k) { return static_cast<float *>(in[k]); }
  const int32_t *ids(size_t k) { return static_cast<const int32_t *>(in[k]); }
  float *fout(size_t k) { return static_cast<float *>(out[k]); }

  /// Requires `ins` inputs and `outs` outputs.
  bool arity(size_t ins, size_t outs);
  /// Requires input (or output) `k` to hold at least `elements` elements.
  bool needIn(size_t k, int64_t elements);
  bool needOut(size_t k, int64_t elements);
  bool fail(const std::string &why);
};

/// A kernel handler: validates, then (unless validating) computes.
using KernelFn = bool (*)(KernelCall &call);

/// The CPU handler of kernel `name`, or null.
KernelFn findCpuKernel(const std::string &name);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_KERNELCALL_H
