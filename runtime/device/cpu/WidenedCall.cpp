//===- WidenedCall.cpp - 16-bit operands around the f32 CPU kernels -------===//

#include "runtime/device/cpu/WidenedCall.h"

#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cpu/CpuKernelCalls.h"

#include "kernels/cpu/CpuKernels.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tessel::rt {

namespace {

/// Per thread (each rank runs its kernels on its own thread), one f32 buffer per operand
/// slot, grown as needed and kept: a step's calls reuse the same memory. Never initialised:
/// an input is widened into it and an output written by the kernel (or widened first).
float *scratch(size_t slot, uint64_t elements) {
  struct Buffer {
    std::unique_ptr<float[]> data;
    uint64_t elements = 0;
  };
  thread_local std::vector<Buffer> buffers;
  if (buffers.size() <= slot)
    buffers.resize(slot + 1);
  Buffer &b = buffers[slot];
  if (b.elements < elements) {
    b.data.reset(new float[elements]);
    b.elements = elements;
  }
  return b.data.get();
}

} // namespace

bool widenedCall(KernelCall &c, const KernelArgs &args) {
  KernelFn f32 = cpuKernel(args.id());
  const planfile::Instr &instr = *c.instr;
  std::vector<void *> in = c.in, out = c.out;
  size_t slot = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    planfile::DType t = instr.inputs[k].dtype;
    if (!isHalf(t))
      continue;
    float *s = scratch(slot++, c.inElements[k]);
    cpu::widen(halfKind(t), static_cast<int64_t>(c.inElements[k]),
               static_cast<const uint16_t *>(in[k]), s);
    c.in[k] = s;
  }
  for (size_t k = 0; k < c.out.size(); ++k) {
    planfile::DType t = instr.outputs[k].dtype;
    if (!isHalf(t))
      continue;
    const size_t same = inputSameAsOutput(instr, c, in, out, k);
    if (same < in.size()) {
      c.out[k] = c.in[same];
      continue;
    }
    float *s = scratch(slot++, c.outElements[k]);
    if (readsOutputs(instr))
      cpu::widen(halfKind(t), static_cast<int64_t>(c.outElements[k]),
                 static_cast<const uint16_t *>(out[k]), s);
    c.out[k] = s;
  }
  bool ok = f32(c, args);
  for (size_t k = 0; k < c.out.size(); ++k)
    if (isHalf(instr.outputs[k].dtype))
      cpu::narrow(halfKind(instr.outputs[k].dtype), static_cast<int64_t>(c.outElements[k]),
                  static_cast<const float *>(c.out[k]), static_cast<uint16_t *>(out[k]));
  c.in = std::move(in);
  c.out = std::move(out);
  return ok;
}

} // namespace tessel::rt
