//===- MemoryProfile.cpp - One rank's memory over a training step ----------===//

#include "common/memory/MemoryProfile.h"

#include "common/layout/PipelineLayout.h"
#include "common/layout/PipelineWalk.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

namespace tessel::memory {

const char *memoryClassName(MemoryClass c) {
  switch (c) {
  case MemoryClass::Parameters:
    return "parameters";
  case MemoryClass::Gradients:
    return "gradients";
  case MemoryClass::Optimizer:
    return "optimizer state";
  case MemoryClass::Kept:
    return "kept activations";
  case MemoryClass::Recomputed:
    return "recomputed";
  case MemoryClass::Temporaries:
    return "temporaries";
  case MemoryClass::Stash:
    return "pipeline stash";
  case MemoryClass::Messages:
    return "pipeline messages";
  }
  return "?";
}

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char text[48];
  std::snprintf(text, sizeof text, u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
  return text;
}

MemoryClass classOfRole(const std::string &role) {
  if (role == "param" || role == "working")
    return MemoryClass::Parameters;
  if (role == "grad")
    return MemoryClass::Gradients;
  return MemoryClass::Optimizer; // adam_m, adam_v, momentum
}

MemoryClass classOfKind(planfile::BufferKind kind) {
  switch (kind) {
  case planfile::BufferKind::Kept:
    return MemoryClass::Kept;
  case planfile::BufferKind::Recomputed:
    return MemoryClass::Recomputed;
  case planfile::BufferKind::Input:
  case planfile::BufferKind::Temporary:
    break;
  }
  return MemoryClass::Temporaries;
}

uint64_t MemorySample::total() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes)
    sum += b;
  return sum;
}

size_t MemoryProfile::peak() const {
  size_t at = 0;
  for (size_t i = 1; i < samples.size(); ++i)
    if (samples[i].total() > samples[at].total())
      at = i;
  return at;
}

std::string MemoryProfile::title() const {
  std::string t = model + ": rank " + std::to_string(rank);
  if (stages > 1)
    t += " (pipeline stage " + std::to_string(stage) + " of " + std::to_string(stages) + ")";
  return t + (measured ? ", measured" : ", predicted");
}

std::array<uint64_t, kMemoryClasses> stateBytesByClass(const planfile::Plan &plan, uint32_t stage) {
  std::array<uint64_t, kMemoryClasses> bytes{};
  for (const planfile::StateTensor &t : plan.state)
    if (t.heldBy(stage))
      bytes[static_cast<size_t>(classOfRole(t.role))] += t.bytes();
  return bytes;
}

std::vector<std::array<uint64_t, kMemoryClasses>>
liveBytesByInstruction(size_t instructions, const std::vector<planfile::ArenaBuffer> &buffers) {
  // A buffer adds its bytes at its first instruction and takes them away after its last.
  std::vector<std::array<int64_t, kMemoryClasses>> change(instructions + 1);
  for (const planfile::ArenaBuffer &b : buffers) {
    if (b.first > b.last || b.last >= instructions)
      continue;
    const size_t c = static_cast<size_t>(classOfKind(b.kind));
    change[b.first][c] += static_cast<int64_t>(b.bytes);
    change[b.last + 1][c] -= static_cast<int64_t>(b.bytes);
  }
  std::vector<std::array<uint64_t, kMemoryClasses>> live(instructions);
  std::array<int64_t, kMemoryClasses> sum{};
  for (size_t i = 0; i < instructions; ++i)
    for (size_t c = 0; c < kMemoryClasses; ++c) {
      sum[c] += change[i][c];
      live[i][c] = static_cast<uint64_t>(sum[c]);
    }
  return live;
}

namespace {

/// Appends the samples of a predicted profile as the rank's programs and transfers go by.
class ProfileBuilder {
public:
  ProfileBuilder(const planfile::Plan &plan, uint32_t rank, MemoryProfile &profile,
                 const InstructionSeconds &seconds)
      : plan_(plan), rank_(rank), profile_(profile), seconds_(seconds),
        state_(stateBytesByClass(plan, plan.pipelineStage(rank))) {}

  /// `program` runs on micro-batch `micro` (-1: not a micro-batch's), with the stash and
  /// message buffers holding `stash` and `messages` bytes meanwhile.
  void run(const planfile::Program &program, int micro, uint64_t stash = 0, uint64_t messages = 0) {
    auto found = arena_.find(&program);
    if (found == arena_.end())
      found =
          arena_.emplace(&program, liveBytesByInstruction(program.instrs.size(), program.buffers))
              .first;
    const std::vector<double> *times = nullptr;
    if (seconds_) {
      auto t = times_.find(&program);
      if (t == times_.end())
        t = times_.emplace(&program, seconds_(program, rank_)).first;
      if (t->second.size() == program.instrs.size())
        times = &t->second;
    }
    for (size_t i = 0; i < program.instrs.size(); ++i) {
      MemorySample s = base(stash, messages);
      for (size_t c = 0; c < kMemoryClasses; ++c)
        s.bytes[c] += found->second[i][c];
      x_ += times ? (*times)[i] : 1.0;
      s.x = x_;
      s.micro = micro;
      s.program = program.name;
      s.instr = static_cast<int64_t>(i);
      s.what = program.instrs[i].kernel;
      s.loc = program.instrs[i].loc;
      profile_.samples.push_back(std::move(s));
    }
  }

  /// A point between programs: a transfer, or a step's start.
  void between(const std::string &what, int micro, uint64_t stash = 0, uint64_t messages = 0,
               bool advance = true) {
    MemorySample s = base(stash, messages);
    if (advance)
      x_ += seconds_ ? 0.0 : 1.0;
    s.x = x_;
    s.micro = micro;
    s.what = what;
    profile_.samples.push_back(std::move(s));
  }

  void mark(const std::string &label) { profile_.marks.push_back({x_, label}); }
  void step(int step) { step_ = step; }

private:
  MemorySample base(uint64_t stash, uint64_t messages) const {
    MemorySample s;
    s.bytes = state_;
    s.bytes[static_cast<size_t>(MemoryClass::Stash)] = stash;
    s.bytes[static_cast<size_t>(MemoryClass::Messages)] = messages;
    s.step = step_;
    return s;
  }

  const planfile::Plan &plan_;
  uint32_t rank_;
  MemoryProfile &profile_;
  const InstructionSeconds &seconds_;
  std::array<uint64_t, kMemoryClasses> state_;
  std::map<const planfile::Program *, std::vector<std::array<uint64_t, kMemoryClasses>>> arena_;
  std::map<const planfile::Program *, std::vector<double>> times_;
  double x_ = 0;
  int step_ = 0;
};

/// A walk of the rank's pipeline actions that records, rather than runs, each program and
/// transfer: the dry walk, as the runtime checks its schedule with, so the stash is the
/// runtime's.
class ProfileHooks : public pipeline::WalkHooks {
public:
  ProfileHooks(const planfile::Plan &plan, uint32_t rank, const pipeline::PipelineWalk &walk,
               ProfileBuilder &builder, bool chunks)
      : plan_(plan), rank_(rank), walk_(walk), builder_(builder), chunks_(chunks) {}

  bool run(const std::string &program, int micro, std::string &error) override {
    const planfile::Program *p = plan_.findProgram(program, rank_);
    if (!p) {
      error = "the plan has no program '" + program + "' for rank " + std::to_string(rank_);
      return false;
    }
    builder_.run(*p, micro, walk_.stashBytes(), walk_.messageBytes());
    return true;
  }
  void endAction(const pipeline::Action &action) override {
    if (pipeline::isCommunication(action.kind))
      builder_.between(pipeline::actionLabel(action, chunks_), action.microbatch,
                       walk_.stashBytes(), walk_.messageBytes());
  }

private:
  const planfile::Plan &plan_;
  uint32_t rank_;
  const pipeline::PipelineWalk &walk_;
  ProfileBuilder &builder_;
  bool chunks_;
};

int64_t configInt(const planfile::Plan &plan, const char *name, int64_t otherwise) {
  if (const planfile::Attr *a = plan.findConfig(name))
    if (auto n = std::get_if<int64_t>(&a->value))
      return *n;
  return otherwise;
}

} // namespace

bool predictMemoryProfile(const planfile::Plan &plan, uint32_t rank, int steps,
                          MemoryProfile &profile, std::string &error,
                          const InstructionSeconds &seconds) {
  if (rank >= plan.worldSize) {
    error = "rank " + std::to_string(rank) + " is not in the plan's " +
            std::to_string(plan.worldSize) + " ranks";
    return false;
  }
  profile = MemoryProfile();
  profile.model = plan.model;
  profile.rank = rank;
  profile.stage = plan.pipelineStage(rank);
  profile.stages = plan.pipelineStages();
  profile.xIsTime = static_cast<bool>(seconds);
  if (plan.version < 10) {
    error = "the plan does not record its buffers' lifetimes (plan version " +
            std::to_string(plan.version) + "; they came with version 10): compile the model again";
    return false;
  }
  for (const planfile::Program &p : plan.programs)
    if (p.stage == profile.stage)
      profile.arenaBytes = std::max(profile.arenaBytes, p.arenaBytes);
  for (uint64_t b : stateBytesByClass(plan, profile.stage))
    profile.stateBytes += b;

  ProfileBuilder builder(plan, rank, profile, seconds);
  const planfile::Program *optimizer = plan.findProgram("optimizer_step", rank);
  std::unique_ptr<pipeline::PipelineLayout> layout;
  std::unique_ptr<pipeline::PipelineWalk> walk;
  if (profile.stages > 1) {
    layout = pipeline::PipelineLayout::create(plan, error);
    if (!layout)
      return false;
    walk = std::make_unique<pipeline::PipelineWalk>(*layout, plan, rank);
  }
  const planfile::Program *forwardBackward = plan.findProgram("forward_backward", rank);
  if (!walk && !forwardBackward) {
    error = "the plan has no forward_backward program";
    return false;
  }
  const int64_t accumulation = std::max<int64_t>(configInt(plan, "train.accumulation", 1), 1);
  for (int step = 1; step <= steps; ++step) {
    builder.step(step);
    builder.mark("step " + std::to_string(step));
    builder.between("step " + std::to_string(step) + " begins", -1, walk ? walk->stashBytes() : 0,
                    walk ? walk->messageBytes() : 0, step > 1);
    if (walk) {
      ProfileHooks hooks(plan, rank, *walk, builder, layout->config().virtualStages > 1);
      if (!walk->step(hooks, error))
        return false;
    } else {
      for (int64_t micro = 0; micro < accumulation; ++micro)
        builder.run(*forwardBackward, static_cast<int>(micro));
    }
    if (optimizer) {
      builder.mark("optimizer step");
      builder.run(*optimizer, -1, walk ? walk->stashBytes() : 0, walk ? walk->messageBytes() : 0);
    }
  }
  return true;
}

} // namespace tessel::memory
