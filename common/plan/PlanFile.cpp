//===- PlanFile.cpp - What a plan says of itself --------------------------===//
//
// The questions the runtime and the tools ask of a loaded plan: a state tensor's bytes and
// stages, a program by name for a rank, the ranks of a stage, a communicator group's instance
// and a rank's place in it. Reading and writing the binary form is PlanFileFormat.cpp's;
// checking that a plan is consistent, PlanValidate.cpp's.
//
//===----------------------------------------------------------------------===//

#include "common/plan/PlanFile.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace tessel::planfile {

uint64_t StateTensor::bytes() const {
  uint64_t n = dtypeBytes(dtype);
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

bool StateTensor::heldBy(uint32_t stage) const {
  return stages.empty() || std::find(stages.begin(), stages.end(), stage) != stages.end();
}

const Attr *Instr::find(const std::string &name) const {
  for (const Attr &a : attrs)
    if (a.name == name)
      return &a;
  return nullptr;
}

const Attr *Plan::findConfig(const std::string &name) const {
  for (const Attr &a : config)
    if (a.name == name)
      return &a;
  return nullptr;
}

const Program *Plan::findProgram(const std::string &name, uint32_t rank) const {
  const uint32_t stage = pipelineStage(rank);
  for (const Program &p : programs)
    if (p.name == name && p.stage == stage)
      return &p;
  return nullptr;
}

std::vector<uint32_t> Plan::ranksOf(const Program &program) const {
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < worldSize; ++r)
    if (pipelineStage(r) == program.stage)
      ranks.push_back(r);
  return ranks;
}

std::vector<std::vector<uint32_t>> Plan::ranksByStage() const {
  std::vector<std::vector<uint32_t>> byStage(pipelineStages());
  for (uint32_t r = 0; r < worldSize; ++r) {
    const uint32_t stage = pipelineStage(r);
    if (stage < byStage.size())
      byStage[stage].push_back(r);
  }
  return byStage;
}

const Group *Plan::groupNamed(const std::string &name) const {
  for (const Group &g : groups)
    if (g.name == name)
      return &g;
  return nullptr;
}

// Axes out of range count as absent and sizes of 0 as 1, so that these never fail on a plan
// that validatePlan has not seen yet; it refuses both.
uint32_t Plan::groupSize(const Group &group) const {
  uint64_t size = 1;
  for (uint32_t a : group.axes)
    if (a < mesh.size())
      size *= std::max<uint32_t>(mesh[a].size, 1);
  return static_cast<uint32_t>(std::min<uint64_t>(size, UINT32_MAX));
}

std::vector<uint32_t> Plan::meshCoordinates(uint32_t rank) const {
  std::vector<uint32_t> c(mesh.size(), 0);
  for (size_t i = mesh.size(); i-- > 0;) {
    const uint32_t size = std::max<uint32_t>(mesh[i].size, 1);
    c[i] = rank % size;
    rank /= size;
  }
  return c;
}

uint32_t Plan::groupIndex(const Group &group, uint32_t rank) const {
  const std::vector<uint32_t> c = meshCoordinates(rank);
  uint64_t index = 0;
  for (uint32_t a : group.axes)
    if (a < mesh.size())
      index = index * std::max<uint32_t>(mesh[a].size, 1) + c[a];
  return static_cast<uint32_t>(index);
}

std::optional<GroupInstance> Plan::findGroup(const std::string &name, uint32_t rank) const {
  const Group *g = groupNamed(name);
  if (!g)
    return std::nullopt;
  // The rank's own coordinates on the other axes, and each of the group's axes' coordinates
  // in turn, the last fastest: ranks come out ascending, in group-index order.
  std::vector<uint64_t> stride(mesh.size(), 1);
  for (size_t i = mesh.size(); i-- > 1;)
    stride[i - 1] = stride[i] * std::max<uint32_t>(mesh[i].size, 1);
  const std::vector<uint32_t> c = meshCoordinates(rank);
  std::vector<uint32_t> axes;
  uint64_t base = rank;
  for (uint32_t a : g->axes)
    if (a < mesh.size()) {
      axes.push_back(a);
      base -= c[a] * stride[a];
    }
  GroupInstance instance;
  instance.index = groupIndex(*g, rank);
  std::vector<uint32_t> at(axes.size(), 0);
  for (uint32_t n = groupSize(*g); n > 0; --n) {
    uint64_t r = base;
    for (size_t k = 0; k < axes.size(); ++k)
      r += at[k] * stride[axes[k]];
    instance.ranks.push_back(static_cast<uint32_t>(r));
    for (size_t k = axes.size(); k-- > 0;) {
      if (++at[k] < std::max<uint32_t>(mesh[axes[k]].size, 1))
        break;
      at[k] = 0;
    }
  }
  return instance;
}

uint32_t Plan::pipelineStages() const {
  const Group *pp = groupNamed("pp");
  return pp ? groupSize(*pp) : 1;
}

uint32_t Plan::pipelineStage(uint32_t rank) const {
  const Group *pp = groupNamed("pp");
  return pp ? groupIndex(*pp, rank) : 0;
}

bool pipelineChunkOf(const std::string &program, uint32_t &chunk) {
  // At most 9 digits: any chunk number fits, and none overflows.
  size_t dot = program.rfind('.');
  if (dot == std::string::npos || dot + 1 == program.size() || program.size() - dot > 10)
    return false;
  uint32_t c = 0;
  for (size_t i = dot + 1; i < program.size(); ++i) {
    if (program[i] < '0' || program[i] > '9')
      return false;
    c = c * 10 + static_cast<uint32_t>(program[i] - '0');
  }
  chunk = c;
  return true;
}

const char *bufferKindName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Temporary:
    return "temporary";
  case BufferKind::Input:
    return "input";
  case BufferKind::Kept:
    return "kept";
  case BufferKind::Recomputed:
    return "recomputed";
  }
  return "?";
}

} // namespace tessel::planfile
