//===- WidenedCall.cpp - 16-bit operands around the f32 CPU kernels -------===//

#include "runtime/device/cpu/WidenedCall.h"

#include "kernels/cpu/CpuKernels.h"

#include <cstdint>
#include <vector>

namespace tessel::rt {

namespace {

bool isHalf(planfile::DType t) {
  return t == planfile::DType::BF16 || t == planfile::DType::F16;
}

cpu::Half16 halfKind(planfile::DType t) {
  return t == planfile::DType::BF16 ? cpu::Half16::BF16 : cpu::Half16::F16;
}

/// Per thread (each rank runs its kernels on its own thread), one f32 buffer per operand
/// slot, grown as needed and kept: a step's calls reuse the same memory.
std::vector<float> &scratch(size_t slot) {
  thread_local std::vector<std::vector<float>> buffers;
  if (buffers.size() <= slot)
    buffers.resize(slot + 1);
  return buffers[slot];
}

} // namespace

bool widenedCall(KernelCall &c, const catalogue::KernelParams &params) {
  KernelFn f32 = cpuKernel(static_cast<catalogue::KernelId>(params.index() - 1));
  if (c.validating)
    return f32(c, params);
  const planfile::Instr &instr = *c.instr;
  std::vector<void *> in = c.in, out = c.out;
  size_t slot = 0;
  for (size_t k = 0; k < c.in.size(); ++k) {
    planfile::DType t = instr.inputs[k].dtype;
    if (!isHalf(t))
      continue;
    std::vector<float> &s = scratch(slot++);
    s.resize(c.inElements[k]);
    cpu::widen(halfKind(t), static_cast<int64_t>(s.size()), static_cast<const uint16_t *>(in[k]),
               s.data());
    c.in[k] = s.data();
  }
  for (size_t k = 0; k < c.out.size(); ++k) {
    planfile::DType t = instr.outputs[k].dtype;
    if (!isHalf(t))
      continue;
    size_t same = 0;
    while (same < in.size() && !(in[same] == out[k] && instr.inputs[same].dtype == t &&
                                 c.inElements[same] == c.outElements[k]))
      ++same;
    if (same < in.size()) {
      c.out[k] = c.in[same];
      continue;
    }
    std::vector<float> &s = scratch(slot++);
    s.resize(c.outElements[k]);
    cpu::widen(halfKind(t), static_cast<int64_t>(s.size()), static_cast<const uint16_t *>(out[k]),
               s.data());
    c.out[k] = s.data();
  }
  bool ok = f32(c, params);
  for (size_t k = 0; k < c.out.size(); ++k)
    if (isHalf(instr.outputs[k].dtype))
      cpu::narrow(halfKind(instr.outputs[k].dtype), static_cast<int64_t>(c.outElements[k]),
                  static_cast<const float *>(c.out[k]), static_cast<uint16_t *>(out[k]));
  c.in = std::move(in);
  c.out = std::move(out);
  return ok;
}

} // namespace tessel::rt
