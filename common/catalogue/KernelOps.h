//===- KernelOps.h - The catalogue's enumerated parameters --------*- C++ -*-===//
//
// The enums KernelCatalogue.def declares (elementwise operations, reductions, schedules), apart
// from the rest of the catalogue: the kernels of every device take these as their operation
// kinds (kernels/KernelTypes.h), so one list of operations serves the plan, the runtime and
// the kernels, and a kernel header includes nothing but this.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_CATALOGUE_KERNELOPS_H
#define TESSEL_COMMON_CATALOGUE_KERNELOPS_H

#include <cstdint>

namespace tessel::catalogue {

#define TESSEL_ENUM(Enum, Doc) enum class Enum : uint8_t {
#define TESSEL_ENUM_VALUE(Enum, Value, Word) Value,
#define TESSEL_ENUM_END(Enum)                                                                      \
  }                                                                                                \
  ;
#include "common/catalogue/KernelCatalogue.def"

} // namespace tessel::catalogue

#endif // TESSEL_COMMON_CATALOGUE_KERNELOPS_H
