//===- MemoryPictures.h - tessel estimate --memory-svg / --memory-trace -*- C++ -*-===//
//
// The predicted memory profile of a training step (common/memory/MemoryProfile.h), drawn: one SVG per
// pipeline stage (its first rank) or of one rank, and every picture's profile in one Chrome
// trace.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_TESSEL_MEMORYPICTURES_H
#define TESSEL_TOOLS_TESSEL_MEMORYPICTURES_H

#include "common/cluster/Cluster.h"
#include "common/plan/PlanFile.h"

#include <string>
#include <vector>

namespace tessel {

struct MemoryPictureOptions {
  std::string svg, trace; ///< Output paths; empty for none.
  int64_t rank = -1;      ///< One rank's picture, or -1 for the first rank of every stage.
  int steps = 2;          ///< Training steps drawn.
  /// x by predicted time on this cluster; null for x by instruction.
  const cluster::Cluster *cluster = nullptr;
};

/// A file to write and what it shows.
struct MemoryPicture {
  std::string path, text, summary; ///< summary: "m.svg: rank 0, peak 1.2 GiB at gemm (m:3:5)".
};

/// The pictures `options` asks for: the SVG of each profiled rank ("m.svg" for one rank, else
/// "m.stage<S>.svg" per pipeline stage) and one trace of them all. False with the reason when
/// the rank is not in the plan or the plan cannot be profiled.
bool memoryPictures(const planfile::Plan &plan, const MemoryPictureOptions &options,
                    std::vector<MemoryPicture> &pictures, std::string &error);

} // namespace tessel

#endif // TESSEL_TOOLS_TESSEL_MEMORYPICTURES_H
