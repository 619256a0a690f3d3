//===- CpuKernelCalls.h - The CPU device's kernel launches ------*- C++ -*-===//
#ifndef TESSEL_RUNTIME_DEVICE_CPU_CPUKERNELCALLS_H
#define TESSEL_RUNTIME_DEVICE_CPU_CPUKERNELCALLS_H

#include "runtime/device/KernelCall.h"

namespace tessel::rt {

/// The CPU device's launch of kernel `id` on f32 and i32 operands (kernels/cpu); every kernel
/// of the catalogue has one.
KernelFn cpuKernel(catalogue::KernelId id);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CPU_CPUKERNELCALLS_H
