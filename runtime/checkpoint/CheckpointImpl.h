//===- CheckpointImpl.h - The checkpoint format's shared names --*- C++ -*-===//
//
// Checkpoint.cpp saves checkpoints and CheckpointLoad.cpp loads them. What both need of the
// format is here: the manifest's format name and versions, the names of a checkpoint's
// files, and the checks both make of shards (whether two blocks overlap, a shard's checksum).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CHECKPOINT_CHECKPOINTIMPL_H
#define TESSEL_RUNTIME_CHECKPOINT_CHECKPOINTIMPL_H

#include "common/support/Checksum.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::rt::detail {

inline constexpr const char *kFormat = "tessel-checkpoint";
/// Version 5 checksums each shard in chunks (kChecksumChunk) with XXH3, so a load that reads a
/// slice checks only its chunks; version 4, with one XXH3 per shard, and version 3, with one
/// FNV-1a, are still read.
inline constexpr int64_t kVersion = 5, kOldestVersion = 3;
inline constexpr const char *kManifestFile = "manifest.json";
inline constexpr const char *kLatestFile = "latest";

/// `path` without trailing slashes, so joined paths read cleanly in messages.
inline std::string trimSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

/// Whether two blocks of a tensor (offset, shape) share an element. Counting elements shows
/// that blocks inside a tensor cover it only when they do not overlap.
inline bool blocksOverlap(const std::vector<int64_t> &offsetA, const std::vector<int64_t> &shapeA,
                          const std::vector<int64_t> &offsetB, const std::vector<int64_t> &shapeB) {
  for (size_t d = 0; d < shapeA.size(); ++d)
    if (std::max(offsetA[d], offsetB[d]) >=
        std::min(offsetA[d] + shapeA[d], offsetB[d] + shapeB[d]))
      return false;
  return true;
}

/// The checksum of a shard's bytes, as its manifest's version computes it.
inline std::string shardChecksum(const void *data, size_t bytes, bool fnv) {
  return hex64(fnv ? fnv1a64(data, bytes) : xxh3_64(data, bytes));
}

} // namespace tessel::rt::detail

#endif // TESSEL_RUNTIME_CHECKPOINT_CHECKPOINTIMPL_H
