//===- Executable.h - Plans embedded in executables -------------*- C++ -*-===//
//
// `tessel compile X.model -o X` writes the runner followed by the plan and a 24-byte
// trailer: u64 plan offset | u64 plan bytes | "TESSEXE1". The runner finds its own plan by
// reading the trailer of /proc/self/exe.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_PLAN_EXECUTABLE_H
#define TESSEL_COMMON_PLAN_EXECUTABLE_H

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::planfile {

/// Appends `plan` and the trailer to the runner bytes in `exe`.
void appendEmbeddedPlan(std::vector<uint8_t> &exe, const std::vector<uint8_t> &plan);

/// Reads the plan embedded in the executable at `path`. Returns false with `error` on an I/O
/// error or a damaged trailer; sets `found` to false (and returns true) when there is none.
bool readEmbeddedPlan(const std::string &path, std::vector<uint8_t> &plan, bool &found,
                      std::string &error);

} // namespace tessel::planfile

#endif // TESSEL_COMMON_PLAN_EXECUTABLE_H
