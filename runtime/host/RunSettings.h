//===- RunSettings.h - The plan's settings, command line on top -*- C++ -*-===//
//
// What training and generation read from the plan's `train` and `dims` sections, each setting
// overridden by its command-line option where one is given; and the host's clock and thread
// count they share.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_RUNSETTINGS_H
#define TESSEL_RUNTIME_HOST_RUNSETTINGS_H

#include "common/plan/PlanFile.h"
#include "runtime/host/Trainer.h"
#include "runtime/support/HostClock.h"

#include <cstdint>
#include <string>

namespace tessel::rt {

/// The plan's config entry `name` (e.g. "train.steps"), or `fallback` where it has none of
/// that type.
int64_t configInt(const planfile::Plan &plan, const std::string &name, int64_t fallback);
double configFloat(const planfile::Plan &plan, const std::string &name, double fallback);
std::string configString(const planfile::Plan &plan, const std::string &name,
                         const std::string &fallback);

/// The run's settings: the plan's `train` section with the command line on top.
struct Settings {
  std::string model;
  int64_t steps, batch, seq, vocab, accumulation, evalEvery, evalBatches, checkpointEvery, logEvery;
  uint64_t seed;
  double evalFraction; ///< Of `data`, held out to evaluate on when no evalData is named.
  std::string data, evalData, tokenizer, checkpointDir, initFrom;

  Settings(const planfile::Plan &plan, const RunOptions &o);
};

/// Compute threads in all: --threads, or every core, shared with the other processes of an
/// MPI job on this host. (Each process taking every core put processes x cores threads on the
/// cores, which spent most of a run waiting for each other.)
int computeThreads(const RunOptions &o);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_RUNSETTINGS_H
