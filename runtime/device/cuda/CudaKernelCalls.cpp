//===- CudaKernelCalls.cpp - Plan kernels launched on a CUDA GPU ----------===//
//
// One launch per plan kernel: the call's arguments, checked when the plan was loaded
// (KernelArgs.h), handed to kernels/cuda on the stream of the launch in progress (CudaLaunch.h).
// Where a kernel's CUDA launcher takes each float operand at its own type (typedIn, typedOut),
// the same launch serves f32 calls and, through cudaSixteenBitKernel, calls with 16-bit
// operands. The collectives and `wait` are the launches every device shares
// (CollectiveCalls.h), ordered after the kernels that write their inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/CudaCalls.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FusedSource.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::rt {

namespace cudacalls {

/// The end of a launch: the CUDA error as the call's.
bool launched(KernelCall &c, cudaError_t e) {
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("CUDA launch failed: ") + cudaGetErrorString(e));
}

cudaStream_t stream(const KernelCall &c) { return cudaLaunchOf(c).stream(); }
cuda::IdError *idError(const KernelCall &c) { return cudaLaunchOf(c).idError(); }

/// Input k at the plan's element type (f32 for a call made without a plan instruction).
cuda::ConstFloats typedIn(KernelCall &c, size_t k) {
  return {c.in[k], c.instr ? operandTypeOf(c.instr->inputs[k].dtype) : planfile::DType::F32};
}
/// Output k at the plan's element type.
cuda::Floats typedOut(KernelCall &c, size_t k) {
  return {c.out[k], c.instr ? operandTypeOf(c.instr->outputs[k].dtype) : planfile::DType::F32};
}

/// `bytes` of the launch's scratch memory; null with the call's error.
void *scratchBytes(KernelCall &c, uint64_t bytes) {
  std::string why;
  void *p = cudaLaunchOf(c).scratch(bytes, why);
  if (!p)
    c.fail("scratch memory: " + why);
  return p;
}
/// `floats` f32 elements of the launch's scratch memory; null with the call's error.
float *scratchFloats(KernelCall &c, int64_t floats) {
  return static_cast<float *>(scratchBytes(c, static_cast<uint64_t>(floats) * sizeof(float)));
}

//===----------------------------------------------------------------------===//
// Tables
//===----------------------------------------------------------------------===//

/// Launches the kernel whose arguments are A.
template <class A> bool launchAs(KernelCall &c, const KernelArgs &args) {
  return launch(c, args.as<A>());
}

/// fused_elementwise with 16-bit operands: the kernel generated for the call's types loads and
/// stores them itself; where none was loaded (no NVRTC), the interpreter between widening
/// copies.
bool launchFusedHalf(KernelCall &c, const KernelArgs &args) {
  if (cudaKernel_t generated = cudaLaunchOf(c).fusedKernel(c.instr))
    return launchGenerated(c, args.as<args::FusedElementwise>(), generated);
  return cudaWidenedCall(c, args);
}

/// The one 16-bit type of a call's first `ins` inputs and `outs` outputs (its operands of the
/// data's type: the rest are f32 statistics), if there is one.
std::optional<planfile::DType> oneHalfType(const KernelCall &c, size_t ins, size_t outs) {
  const planfile::DType t = c.instr->inputs[0].dtype;
  if (!planfile::isHalf(t))
    return std::nullopt;
  for (size_t k = 0; k < ins; ++k)
    if (c.instr->inputs[k].dtype != t)
      return std::nullopt;
  for (size_t k = 0; k < outs; ++k)
    if (c.instr->outputs[k].dtype != t)
      return std::nullopt;
  return t;
}

const uint16_t *halfIn(const KernelCall &c, size_t k) {
  return static_cast<const uint16_t *>(c.in[k]);
}
uint16_t *halfOut(const KernelCall &c, size_t k) { return static_cast<uint16_t *>(c.out[k]); }

/// Whether every operand of a call starts on 16 bytes (the tensor-core kernels' loads).
bool operandsAligned(const KernelCall &c) {
  for (const auto *operands : {&c.in, &c.out})
    for (const void *p : *operands)
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
        return false;
  return true;
}

/// The type the tensor-core attention kernels run a call on: its first `ins` inputs and `outs`
/// outputs (all but the f32 lse) of one 16-bit type, at sizes they take, on 16 bytes. None for
/// any other call, which runs widened.
std::optional<planfile::DType> tensorCoreType(const KernelCall &c, const cuda::AttentionArgs &a,
                                              size_t ins, size_t outs) {
  const std::optional<planfile::DType> type = oneHalfType(c, ins, outs);
  if (!type || !cuda::flashAttentionTakes(a) || !operandsAligned(c))
    return std::nullopt;
  return type;
}

/// attention on 16-bit operands: the tensor-core kernels on the operands as they are where
/// they take the call, else the f32 kernel between widening copies.
bool launchAttentionHalf(KernelCall &c, const KernelArgs &args) {
  const args::Attention &call = args.as<args::Attention>();
  const std::optional<planfile::DType> type = tensorCoreType(c, call.a, 3, 1);
  if (!type)
    return cudaWidenedCall(c, args);
  return launched(c, cuda::flashAttention(*type, call.a, halfIn(c, 0), halfIn(c, 1), halfIn(c, 2),
                                          halfOut(c, 0), call.lse ? c.fout(1) : nullptr,
                                          stream(c)));
}

bool launchAttentionGradHalf(KernelCall &c, const KernelArgs &args) {
  const args::AttentionGrad &call = args.as<args::AttentionGrad>();
  const std::optional<planfile::DType> type = tensorCoreType(c, call.a, call.lse ? 5 : 4, 3);
  if (!type)
    return cudaWidenedCall(c, args);
  void *workspace = scratchBytes(c, cuda::flashAttentionGradWorkspaceBytes(call.a, call.lse));
  return workspace &&
         launched(c, cuda::flashAttentionGrad(
                         *type, call.a, halfIn(c, 0), halfIn(c, 1), halfIn(c, 2), halfIn(c, 3),
                         call.lse ? halfIn(c, 4) : nullptr, call.lse ? c.fin(5) : nullptr,
                         halfOut(c, 0), halfOut(c, 1), halfOut(c, 2), workspace, stream(c)));
}

/// The largest head the attention kernels take.
bool headFits(KernelCall &c, int64_t head) {
  if (head <= cuda::kMaxAttentionHead)
    return true;
  return c.fail("has head size " + std::to_string(head) +
                "; the cuda attention kernels take at most " +
                std::to_string(cuda::kMaxAttentionHead));
}

} // namespace cudacalls

using namespace cudacalls;

KernelFn cudaKernel(catalogue::KernelId id) {
  // Every kernel of the catalogue has a launch (CudaCalls.h): one missing fails to link.
  static const KernelFn table[] = {
#define TESSEL_KERNEL(Id, Name, Family, Doc) &launchAs<args::Id>,
#include "common/catalogue/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  return table[static_cast<size_t>(id)];
}

KernelFn cudaSixteenBitKernel(catalogue::KernelId id, const std::vector<planfile::DType> &ins,
                              const std::vector<planfile::DType> &outs) {
  using planfile::DType;
  if (sixteenBitOf(id) != SixteenBit::CudaNative)
    return nullptr;
  switch (id) {
  case catalogue::KernelId::Gemm:
    // A product of two 16-bit operands of one type, into f32 or that type: the tensor cores.
    if (ins.size() == 2 && ins[0] != DType::F32 && ins[0] == ins[1] && outs.size() == 1 &&
        (outs[0] == DType::F32 || outs[0] == ins[0]))
      return &launchMixedGemm;
    return nullptr;
  case catalogue::KernelId::FusedElementwise:
    return &launchFusedHalf;
  case catalogue::KernelId::Attention:
    return &launchAttentionHalf;
  case catalogue::KernelId::AttentionGrad:
    return &launchAttentionGradHalf;
  default:
    // AdamW writes its 16-bit working copies itself; the others pass each float operand at
    // its own type (typedIn, typedOut).
    return cudaKernel(id);
  }
}

bool cudaAccepts(KernelCall &c, const KernelArgs &args) {
  switch (args.id()) {
  case catalogue::KernelId::Attention:
    return headFits(c, args.as<args::Attention>().a.head);
  case catalogue::KernelId::AttentionGrad:
    return headFits(c, args.as<args::AttentionGrad>().a.head);
  case catalogue::KernelId::AttentionBlock:
    return headFits(c, args.as<args::AttentionBlock>().r.attention.head);
  case catalogue::KernelId::AttentionBlockGrad:
    return headFits(c, args.as<args::AttentionBlockGrad>().r.attention.head);
  case catalogue::KernelId::PagedAttention:
    return headFits(c, args.as<args::PagedAttention>().a.head);
  case catalogue::KernelId::FusedElementwise: {
    const size_t steps = args.as<args::FusedElementwise>().steps.size();
    if (steps > static_cast<size_t>(cuda::kMaxFusedSteps) ||
        c.in.size() > static_cast<size_t>(cuda::kMaxFusedInputs) ||
        c.out.size() > static_cast<size_t>(cuda::kMaxFusedOutputs))
      return c.fail("has " + std::to_string(steps) + " steps, " + std::to_string(c.in.size()) +
                    " inputs and " + std::to_string(c.out.size()) +
                    " outputs; the cuda device runs at most " +
                    std::to_string(cuda::kMaxFusedSteps) + ", " +
                    std::to_string(cuda::kMaxFusedInputs) + " and " +
                    std::to_string(cuda::kMaxFusedOutputs) + " (compile with --fuse=off)");
    return true;
  }
  default:
    return true;
  }
}

} // namespace tessel::rt
