//===- WidenedCall.h - 16-bit operands around the f32 CPU kernels -*- C++ -*-===//
//
// The CPU kernels compute in f32. A call with bf16 or f16 operands runs them through one
// wrapper rather than a 16-bit copy of each kernel: its 16-bit operands are widened into f32
// scratch, the kernel's f32 handler runs on the scratch, and its 16-bit outputs are rounded
// back to nearest even. That is the semantics of the CUDA kernels' 16-bit instantiations (16-bit
// in, f32 compute, 16-bit out), so both devices give a plan the same meaning. A call whose
// operands are all f32 or i32 never meets the wrapper: the device hands out the f32 handler.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CPU_WIDENEDCALL_H
#define TESSEL_RUNTIME_DEVICE_CPU_WIDENEDCALL_H

#include "runtime/device/KernelCall.h"

namespace tessel::rt {

/// The launch of a compute kernel with 16-bit operands: widens them into this thread's f32
/// scratch (an output only when the call reads it, readsOutputs; an output that is one of
/// the inputs shares that input's scratch, so in-place kernels stay in place), runs the
/// kernel's f32 launch (cpuKernel) there, and narrows the 16-bit outputs back. The call's
/// element counts are per operand whatever its type, so its check holds for the scratch too.
bool widenedCall(KernelCall &call, const KernelArgs &args);

/// paged_attention with 16-bit caches: only the cache blocks the call's sequences hold are
/// widened (into a compact f32 pool the block table is renumbered for), and only the new
/// tokens' slots narrowed back, so a decode step costs what its sequences hold, not the whole
/// cache.
bool widenedPagedAttention(KernelCall &call, const KernelArgs &args);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CPU_WIDENEDCALL_H
