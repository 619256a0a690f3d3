//===- RunRecord.h - The first line a run writes to its metrics -*- C++ -*-===//
//
// A metrics file is appended to, so that a resumed run continues its predecessor's curve; each
// run first writes one record saying what it is: which Tessel ran it (release and commit),
// which plan (its fingerprint, its model, where it came from), the recipe as compiled and the
// numbers the command line replaced, the seed and steps, the layout (mesh, ranks, processes,
// threads) and the device, when it started, and whether it resumed (from which checkpoint, at
// which step). A reader splits a file into runs at these records.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_RUNRECORD_H
#define TESSEL_RUNTIME_HOST_RUNRECORD_H

#include "common/plan/PlanFile.h"
#include "runtime/host/Trainer.h"
#include "runtime/support/Json.h"

#include <cstdint>
#include <string>

namespace tessel::rt {

/// What only the running session knows.
struct RunFacts {
  uint64_t seed = 0;
  int64_t steps = 0;
  std::string device, deviceModel; ///< "cpu" / "cuda:0"; the hardware's name.
  uint32_t processes = 1;
  int threadsPerRank = 1;
  /// The checkpoint a resumed run loaded, and its step; empty for a fresh run.
  std::string resumedFrom;
  int64_t resumedStep = 0;
};

/// The record: {"run": {...}}.
Json runRecord(const planfile::Plan &plan, const RunOptions &options, const RunFacts &facts);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_RUNRECORD_H
