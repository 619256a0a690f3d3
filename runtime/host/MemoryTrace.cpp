//===- MemoryTrace.cpp - The runner's --memory-trace -----------------------===//

#include "runtime/host/MemoryTrace.h"

#include "runtime/core/HostMemory.h"
#include "runtime/support/AtomicFile.h"

#include <cstdio>

namespace tessel::rt {

MemoryTrace::MemoryTrace(const planfile::Plan &plan, Ranks &ranks, int64_t firstStep, int64_t steps,
                         std::string path)
    : plan_(plan), ranks_(ranks), firstStep_(firstStep), steps_(steps), path_(std::move(path)) {
  for (uint32_t rank : ranks_.localRanks()) {
    memory::MemoryProfile &p = profiles_[rank];
    p.model = plan.model;
    p.rank = rank;
    p.stage = plan.pipelineStage(rank);
    p.stages = plan.pipelineStages();
    p.measured = true;
    p.arenaBytes = ranks_.executor(rank).arenaBytes();
    p.stateBytes = ranks_.executor(rank).stateBytes();
  }
}

void MemoryTrace::beginStep(int64_t step) {
  for (uint32_t rank : ranks_.localRanks()) {
    Executor &ex = ranks_.executor(rank);
    ex.enableMemoryTrace(true);
    ex.noteMemory("step " + std::to_string(step) + " begins");
  }
}

void MemoryTrace::endStep(int64_t step) {
  const int stepNumber = static_cast<int>(step - firstStep_ + 1);
  for (uint32_t rank : ranks_.localRanks()) {
    Executor &ex = ranks_.executor(rank);
    ex.enableMemoryTrace(false);
    memory::MemoryProfile &p = profiles_[rank];
    // Marks and x as tessel estimate places them: a step's mark at the sample before it, the
    // optimizer step's at the sample before its first instruction.
    p.marks.push_back(
        {p.samples.empty() ? 0.0 : p.samples.back().x, "step " + std::to_string(stepNumber)});
    bool optimizer = false;
    for (memory::MemorySample &s : ex.takeMemorySamples()) {
      if (!optimizer && s.program == "optimizer_step") {
        optimizer = true;
        p.marks.push_back({p.samples.empty() ? 0.0 : p.samples.back().x, "optimizer step"});
      }
      s.x = static_cast<double>(p.samples.size());
      s.step = stepNumber;
      if (s.program == "optimizer_step")
        s.micro = -1;
      p.samples.push_back(std::move(s));
    }
  }
}

bool MemoryTrace::write(bool quiet, std::string &error) {
  for (uint32_t rank : ranks_.localRanks()) {
    const std::vector<std::string> &faults = ranks_.executor(rank).memoryFaults();
    if (faults.empty())
      continue;
    error = "--memory-trace: rank " + std::to_string(rank) +
            "'s kernels touched arena bytes its plan's buffers do not explain:";
    for (const std::string &f : faults)
      error += "\n  " + f;
    return false;
  }
  if (!ranks_.isMainProcess())
    return true;
  std::vector<memory::MemoryProfile> profiles;
  for (auto &[rank, profile] : profiles_)
    profiles.push_back(profile);
  if (!writeFileAtomically(path_, memory::memoryProfileTraceJson(profiles), error))
    return false;
  if (!quiet) {
    uint64_t peak = 0, resident = 0;
    for (const memory::MemoryProfile &p : profiles)
      for (const memory::MemorySample &s : p.samples) {
        peak = std::max(peak, s.total());
        resident = std::max(resident, s.resident);
      }
    std::printf("memory trace: %lld steps of %zu %s in %s (peak %s planned, %s resident)\n",
                static_cast<long long>(steps_), profiles.size(),
                profiles.size() == 1 ? "rank" : "ranks", path_.c_str(), formatBytes(peak).c_str(),
                formatBytes(resident).c_str());
  }
  return true;
}

} // namespace tessel::rt
