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

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessel::catalogue {

#define TESSEL_ENUM(Enum, Doc) enum class Enum : uint8_t {
#define TESSEL_ENUM_VALUE(Enum, Value, Word) Value,
#define TESSEL_ENUM_END(Enum)                                                                      \
  }                                                                                                \
  ;
#include "common/catalogue/KernelCatalogue.def"

/// Each enum's name and the words of its values in declaration order, as a plan stores them.
/// Header-only, so that whatever names these operations (the plan's decoding, the language's
/// built-ins, the graph dialect's functions) reads them from this one list.
template <class E> struct EnumWords;
#define TESSEL_ENUM(Enum, Doc)                                                                     \
  template <> struct EnumWords<Enum> {                                                             \
    static constexpr const char *name = #Enum;                                                     \
    static constexpr std::string_view words[] = {
#define TESSEL_ENUM_VALUE(Enum, Value, Word) Word,
#define TESSEL_ENUM_END(Enum)                                                                      \
  }                                                                                                \
  ;                                                                                                \
  }                                                                                                \
  ;
#include "common/catalogue/KernelCatalogue.def"

/// How many values `E` has.
template <class E> constexpr size_t enumSize() {
  return sizeof(EnumWords<E>::words) / sizeof(EnumWords<E>::words[0]);
}

/// The word of an enum value, as a plan stores it.
template <class E> constexpr std::string_view wordOf(E value) {
  return EnumWords<E>::words[static_cast<size_t>(value)];
}

/// The value of `E` whose word is `word`, if it has one.
template <class E> constexpr std::optional<E> enumOf(std::string_view word) {
  for (size_t i = 0; i < enumSize<E>(); ++i)
    if (EnumWords<E>::words[i] == word)
      return static_cast<E>(i);
  return std::nullopt;
}

} // namespace tessel::catalogue

#endif // TESSEL_COMMON_CATALOGUE_KERNELOPS_H
