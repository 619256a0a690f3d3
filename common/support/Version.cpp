//===- Version.cpp - Which Tessel this is ---------------------------------===//

#include "common/support/Version.h"

// TESSEL_SOURCE_COMMIT, rewritten by common/support/WriteSourceCommit.cmake at each build when the
// commit changes.
#include "common/support/SourceCommit.h"

namespace tessel {

const char *releaseVersion() { return TESSEL_RELEASE_VERSION; }

const char *sourceCommit() { return TESSEL_SOURCE_COMMIT; }

std::string versionLine() {
  return std::string("tessel ") + releaseVersion() + " (commit " + sourceCommit() + ")";
}

} // namespace tessel
