//===- DType.h - Element types of plan buffers ------------------*- C++ -*-===//
//
// The element types a plan's buffers, ports and state tensors hold, and what the runtime's
// communicators move: apart from the plan format so that a collective can name its elements'
// type without the rest of the plan.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_DTYPE_H
#define TESSEL_COMMON_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>

namespace tessel::planfile {

/// Floating-point kernels take f32, bf16 or f16 operands (common/catalogue/KernelCatalogue.def says
/// which of each kernel); ids and targets are i32.
enum class DType : uint8_t { F32 = 0, I32 = 1, BF16 = 2, F16 = 3 };
constexpr DType kLastDType = DType::F16;

constexpr size_t dtypeBytes(DType t) {
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

} // namespace tessel::planfile

#endif // TESSEL_COMMON_SUPPORT_DTYPE_H
