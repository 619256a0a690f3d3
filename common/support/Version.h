//===- Version.h - Which Tessel this is -------------------------*- C++ -*-===//
//
// The release and the source commit a program was built from: `tessel --version`, the runner's
// `--version`, and the run record at the head of a run's metrics.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_VERSION_H
#define TESSEL_COMMON_SUPPORT_VERSION_H

#include <string>

namespace tessel {

/// The release, as CMake's project version ("0.1.0").
const char *releaseVersion();
/// The git commit of the source tree, abbreviated, with "-dirty" when the tree had changes
/// beside it; "unknown" when the source was not a git checkout.
const char *sourceCommit();
/// "tessel 0.1.0 (commit 464b1739a1b2)": the one line tools print for --version.
std::string versionLine();

} // namespace tessel

#endif // TESSEL_COMMON_SUPPORT_VERSION_H
