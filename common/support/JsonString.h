//===- JsonString.h - JSON string literals ----------------------*- C++ -*-===//
//
// The one JSON string escaper, shared by the runtime's JSON writer (runtime/support/Json.h) and the
// timeline writers, which the compiler links without the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_JSONSTRING_H
#define TESSEL_COMMON_SUPPORT_JSONSTRING_H

#include <string>

namespace tessel {

/// Appends `value` to `out` as a JSON string literal (quoted and escaped).
void appendJsonString(std::string &out, const std::string &value);

} // namespace tessel

#endif // TESSEL_COMMON_SUPPORT_JSONSTRING_H
