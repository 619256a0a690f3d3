//===- DType.h - Element types of plan buffers ------------------*- C++ -*-===//
//
// The one list of element types: what the language's tensors hold, what a plan's buffers,
// ports and state tensors hold, what the runtime's communicators move and what every device's
// kernels take. Apart from the plan format so that a collective can name its elements' type
// without the rest of the plan; header-only, so the front end and the CUDA kernels (whose
// device code may ask a type's size) use it as they are.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_DTYPE_H
#define TESSEL_COMMON_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TESSEL_DTYPE_HOST_DEVICE __host__ __device__
#else
#define TESSEL_DTYPE_HOST_DEVICE
#endif

namespace tessel::planfile {

/// Floating-point kernels take f32, bf16 or f16 operands (common/catalogue/KernelCatalogue.def says
/// which of each kernel); ids and targets are i32. A kernel argument that names a 16-bit
/// format takes BF16 or F16.
enum class DType : uint8_t { F32 = 0, I32 = 1, BF16 = 2, F16 = 3 };
constexpr DType kLastDType = DType::F16;

TESSEL_DTYPE_HOST_DEVICE constexpr size_t dtypeBytes(DType t) {
  return t == DType::BF16 || t == DType::F16 ? 2 : t == DType::F32 || t == DType::I32 ? 4 : 0;
}

constexpr const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "?";
}

constexpr bool isFloat(DType t) { return t != DType::I32; }
/// Whether `t` is one of the 16-bit float formats.
TESSEL_DTYPE_HOST_DEVICE constexpr bool isHalf(DType t) {
  return t == DType::BF16 || t == DType::F16;
}

} // namespace tessel::planfile

#endif // TESSEL_COMMON_SUPPORT_DTYPE_H
