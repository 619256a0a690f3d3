//===- Isa.h - The instruction set a kernel file is compiled for -*- C++ -*-===//
//
// Private to kernels/cpu. Most kernel files are compiled once, for x86-64's baseline (SSE2).
// The attention kernels and gemm's few-row products (SkinnyGemm.cpp) are also compiled for
// AVX2 and AVX-512 (kernels/cpu/CMakeLists.txt), each copy with TESSEL_CPU_ISA naming its
// instruction set; everything the private headers define lives in an inline namespace of that
// name, so no function compiled with wide instructions is shared with (or picked by the linker
// for) the baseline's callers. Floating point contraction is off in every copy: the same
// additions, multiplications and explicit fused multiply-adds (Simd.h's mulAdd) in the same
// order, so the copies give the same bits and the choice (made at run time from what the CPU
// supports, or forced with TESSEL_CPU_ISA=baseline|avx2|avx512) never changes a result.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CPU_ISA_H
#define TESSEL_KERNELS_CPU_ISA_H

#ifndef TESSEL_CPU_ISA
#define TESSEL_CPU_ISA baseline
#endif

#endif // TESSEL_KERNELS_CPU_ISA_H
