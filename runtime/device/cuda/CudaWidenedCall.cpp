//===- CudaWidenedCall.cpp - 16-bit operands around the f32 CUDA kernels --===//
//
// The CUDA device's counterpart of the CPU device's widening wrapper (device/cpu/
// WidenedCall.cpp), with the same meaning: 16-bit in, f32 compute, 16-bit out rounded to
// nearest even. The conversions are kernels on the launch's stream, so they are ordered with
// the call like any launch. Run on an H200 by the bf16 training check of scripts/gpu-window.sh.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/HalfOperands.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"

#include <string>
#include <vector>

namespace tessel::rt {

namespace {

bool converted(KernelCall &c, cudaError_t e) {
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("converting a 16-bit operand: ") + cudaGetErrorString(e));
}

} // namespace

bool cudaWidenedCall(KernelCall &c, const KernelArgs &args) {
  KernelFn f32 = cudaKernel(args.id());
  CudaLaunch &launch = cudaLaunchOf(c);
  const cudaStream_t stream = launch.stream();
  const planfile::Instr &instr = *c.instr;
  std::vector<void *> in = c.in, out = c.out;
  size_t slot = 0;
  bool ok = true;
  auto wide = [&](const void *x, planfile::DType t, uint64_t n, bool read) -> float * {
    std::string why;
    auto *s = static_cast<float *>(launch.operandScratch(slot++, n * sizeof(float), why));
    if (!s) {
      c.fail("scratch memory: " + why);
      return nullptr;
    }
    if (read && !converted(c, cuda::widen(t, static_cast<int64_t>(n),
                                          static_cast<const uint16_t *>(x), s, stream)))
      return nullptr;
    return s;
  };
  // An output is widened only for a call that reads it (HalfOperands.h says why no other
  // kernel needs it).
  const bool widenOutputs = readsOutputs(instr);
  for (size_t k = 0; ok && k < c.in.size(); ++k)
    if (planfile::isHalf(instr.inputs[k].dtype))
      ok = (c.in[k] = wide(in[k], instr.inputs[k].dtype, c.inElements[k], true)) != nullptr;
  for (size_t k = 0; ok && k < c.out.size(); ++k) {
    const planfile::DType t = instr.outputs[k].dtype;
    if (!planfile::isHalf(t))
      continue;
    const size_t same = inputSameAsOutput(instr, c, in, out, k);
    // An output that is one of the inputs shares its copy, so in-place kernels stay in place.
    if (same < in.size())
      c.out[k] = c.in[same];
    else
      ok = (c.out[k] = wide(out[k], t, c.outElements[k], widenOutputs)) != nullptr;
  }
  if (ok)
    ok = f32(c, args);
  for (size_t k = 0; ok && k < c.out.size(); ++k)
    if (planfile::isHalf(instr.outputs[k].dtype))
      ok = converted(c, cuda::narrow(instr.outputs[k].dtype, static_cast<int64_t>(c.outElements[k]),
                                     static_cast<const float *>(c.out[k]),
                                     static_cast<uint16_t *>(out[k]), stream));
  c.in = std::move(in);
  c.out = std::move(out);
  return ok;
}

} // namespace tessel::rt
