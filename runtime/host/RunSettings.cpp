//===- RunSettings.cpp - The plan's settings under the command line -------===//

#include "runtime/host/RunSettings.h"

#include "runtime/comm/MpiCommunicator.h"

#include <algorithm>
#include <thread>
#include <variant>

namespace tessel::rt {

int64_t configInt(const planfile::Plan &plan, const std::string &name, int64_t fallback) {
  const planfile::Attr *a = plan.findConfig(name);
  return a && std::holds_alternative<int64_t>(a->value) ? std::get<int64_t>(a->value) : fallback;
}

double configFloat(const planfile::Plan &plan, const std::string &name, double fallback) {
  const planfile::Attr *a = plan.findConfig(name);
  return a && std::holds_alternative<double>(a->value) ? std::get<double>(a->value) : fallback;
}

std::string configString(const planfile::Plan &plan, const std::string &name, const std::string &fallback) {
  const planfile::Attr *a = plan.findConfig(name);
  return a && std::holds_alternative<std::string>(a->value) ? std::get<std::string>(a->value)
                                                            : fallback;
}

Settings::Settings(const planfile::Plan &plan, const RunOptions &o) {
  model = plan.model;
  steps = o.steps.value_or(configInt(plan, "train.steps", 1));
  batch = configInt(plan, "dims.batch", 1);
  seq = configInt(plan, "dims.seq", 1);
  vocab = configInt(plan, "dims.vocab", 256);
  accumulation = std::max<int64_t>(1, configInt(plan, "train.accumulation", 1));
  seed = static_cast<uint64_t>(o.seed.value_or(configInt(plan, "train.seed", 0)));
  evalEvery = o.evalEvery.value_or(configInt(plan, "train.eval_every", 0));
  evalBatches = std::max<int64_t>(1, configInt(plan, "train.eval_batches", 8));
  data = o.data.value_or(configString(plan, "train.data", ""));
  evalData = o.evalData.value_or(configString(plan, "train.eval_data", ""));
  // The spec's eval.fraction is held out unless validation data is named, whether or not
  // the run evaluates: turning evaluation on or off never changes what trains.
  evalFraction = evalData.empty() ? configFloat(plan, "train.eval_fraction", 0.0) : 0.0;
  checkpointEvery = o.checkpointEvery.value_or(configInt(plan, "train.checkpoint_every", 0));
  checkpointDir = o.checkpointDir.value_or(configString(plan, "train.checkpoint_dir", ""));
  logEvery = std::max<int64_t>(1, o.logEvery.value_or(configInt(plan, "train.log_every", 1)));
  tokenizer = configString(plan, "train.tokenizer", "byte");
  initFrom = o.initFrom.value_or(configString(plan, "train.init_from", ""));
}

int computeThreads(const RunOptions &o) {
  if (o.threads > 0)
    return o.threads;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned sharing = mpi::launched() ? std::max(1u, mpi::processesOnThisHost()) : 1u;
  return static_cast<int>(std::max(1u, cores / sharing));
}


} // namespace tessel::rt
