//===- PlanValidate.cpp - A plan's consistency, checked before use --------===//
//
// What a parsed plan must satisfy before the runtime allocates or runs anything for it: a mesh
// whose axes multiply to the world and groups over known axes, programs on existing stages,
// state tensors of bounded size with consistent roles, and every instruction's operands inside
// their buffers. Each failure names what is wrong, so a damaged or hand-edited plan is refused
// with a reason.
//
//===----------------------------------------------------------------------===//

#include "common/plan/PlanFile.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

namespace tessel::planfile {

namespace {

/// The mesh's axes are named once each and of positive sizes that multiply to the world; each
/// group is named once and spans known axes in ascending order.
bool validateMesh(const Plan &plan, std::string &error) {
  uint64_t ranks = 1;
  std::set<std::string> axisNames;
  for (size_t a = 0; a < plan.mesh.size(); ++a) {
    const MeshAxis &axis = plan.mesh[a];
    if (axis.name.empty() || !axisNames.insert(axis.name).second) {
      error = "mesh axis " + std::to_string(a) +
              (axis.name.empty() ? " has no name" : " '" + axis.name + "' is named twice");
      return false;
    }
    if (axis.size == 0) {
      error = "mesh axis '" + axis.name + "' has size 0";
      return false;
    }
    ranks = std::min<uint64_t>(ranks * axis.size, uint64_t(1) << 40);
  }
  if (ranks != plan.worldSize) {
    std::string sizes;
    for (const MeshAxis &axis : plan.mesh)
      sizes += (sizes.empty() ? "" : ", ") + axis.name + " = " + std::to_string(axis.size);
    error = "the mesh {" + sizes + "} has " + std::to_string(ranks) +
            (ranks == 1 ? " rank" : " ranks") + ", but the plan has " +
            std::to_string(plan.worldSize);
    return false;
  }
  std::set<std::string> groupNames;
  for (const Group &g : plan.groups) {
    if (g.name.empty() || !groupNames.insert(g.name).second) {
      error = g.name.empty() ? "a group has no name" : "group '" + g.name + "' is described twice";
      return false;
    }
    for (size_t k = 0; k < g.axes.size(); ++k) {
      if (g.axes[k] >= plan.mesh.size()) {
        error = "group '" + g.name + "' spans axis " + std::to_string(g.axes[k]) +
                ", but the mesh has " + std::to_string(plan.mesh.size());
        return false;
      }
      if (k > 0 && g.axes[k] <= g.axes[k - 1]) {
        error = "group '" + g.name + "' lists its axes out of order (outermost first, once each)";
        return false;
      }
    }
  }
  return true;
}

/// A `split` has one entry per dim (or none), each naming a group or "".
bool validateSplit(const Plan &plan, const std::vector<std::string> &split, size_t rank,
                   const std::string &what, std::string &error) {
  if (!split.empty() && split.size() != rank) {
    error = what + " has " + std::to_string(split.size()) + " split entries for " +
            std::to_string(rank) + " dims";
    return false;
  }
  for (const std::string &g : split)
    if (!g.empty() && !plan.groupNamed(g)) {
      error = what + " is split over group '" + g + "', which the plan does not have";
      return false;
    }
  return true;
}

/// A (program, stage) pair appears once. A program without a chunk is on every stage (the
/// SPMD programs: forward_backward, optimizer_step, eval, sample); a pipeline program of chunk c
/// is on stage c % stages and on no other.
bool validateProgramStages(const Plan &plan, std::string &error) {
  const uint32_t stages = plan.pipelineStages();
  std::map<std::string, std::vector<int>> count; // Per program, its versions per stage.
  for (const Program &p : plan.programs) {
    std::vector<int> &c = count[p.name];
    c.resize(stages, 0);
    if (++c[p.stage] > 1) {
      error = "program '" + p.name + "' appears twice for stage " + std::to_string(p.stage);
      return false;
    }
  }
  for (const auto &[name, c] : count) {
    uint32_t chunk = 0;
    bool pipelined = pipelineChunkOf(name, chunk);
    if (!pipelined && name.find('.') != std::string::npos) {
      error = "program '" + name + "' has a '.' but no chunk number after it";
      return false;
    }
    for (uint32_t stage = 0; stage < stages; ++stage) {
      bool wanted = !pipelined || stage == chunk % stages;
      if (wanted && c[stage] == 0) {
        error = "program '" + name + "' has no version for pipeline stage " + std::to_string(stage);
        if (pipelined)
          error += ", which runs chunk " + std::to_string(chunk);
        return false;
      }
      if (!wanted && c[stage] != 0) {
        error = "program '" + name + "' is on pipeline stage " + std::to_string(stage) +
                ", but chunk " + std::to_string(chunk) + " runs on stage " +
                std::to_string(chunk % stages);
        return false;
      }
    }
  }
  return true;
}

} // namespace

/// Bounds on what a plan may describe, checked before anything is allocated for it: far above
/// any real model or cluster, far below what a damaged count can make a process try to hold.
constexpr uint32_t kMaxRanks = 1u << 20;
constexpr uint32_t kMaxStreams = 64;
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 44; // 16 TiB

/// The bytes of `elementBytes`-byte elements over `shape`, or false (with `error`) when the
/// count is not positive or exceeds kMaxTensorBytes.
static bool boundedBytes(const std::vector<int64_t> &shape, uint64_t elementBytes,
                         const std::string &what, std::string &error) {
  unsigned __int128 bytes = elementBytes;
  std::string dims;
  for (int64_t d : shape)
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  for (int64_t d : shape) {
    if (d <= 0 || d > (int64_t(1) << 40)) {
      error = what + " has an invalid dim " + std::to_string(d) + " in [" + dims + "]";
      return false;
    }
    bytes *= static_cast<uint64_t>(d);
    if (bytes > kMaxTensorBytes) {
      error = what + " of shape [" + dims + "] is larger than a plan may describe (16 TiB)";
      return false;
    }
  }
  return true;
}

/// A tensor's role is one the runtime knows; the runtime initialises and checkpoints by role,
/// so a tensor it misread would train silently wrong. Parameters, and the working copies the
/// `working_copies` program makes from them, are checked further: a copy is a 16-bit tensor
/// of a parameter's own shape, split and stages (`params`: the plan's parameters by name).
static bool validateRole(const std::unordered_map<std::string, const StateTensor *> &params,
                         const StateTensor &t, std::string &error) {
  static const char *const kRoles[] = {"param",    "grad",    "adam_m",   "adam_v",
                                       "momentum", "working", "kv_cache", "decode_state"};
  if (std::find(std::begin(kRoles), std::end(kRoles), t.role) == std::end(kRoles)) {
    error = "state tensor '" + t.name + "' has the unknown role '" + t.role + "'";
    return false;
  }
  if (t.role == "param" && (t.dtype != DType::F32 || !t.of.empty())) {
    error = "parameter '" + t.name + "' must be f32 and belong to no other tensor";
    return false;
  }
  if (t.role != "working")
    return true;
  auto found = params.find(t.of);
  const StateTensor *master = found == params.end() ? nullptr : found->second;
  if (!master || dtypeBytes(t.dtype) != 2 || !isFloat(t.dtype) || t.shape != master->shape ||
      t.split != master->split || t.stages != master->stages) {
    error = "working copy '" + t.name + "' must be a 16-bit float tensor of a parameter's " +
            "shape, split and stages" + (master ? "" : " ('" + t.of + "' is no parameter)");
    return false;
  }
  return true;
}

bool validatePlan(const Plan &plan, std::string &error) {
  if (plan.worldSize == 0 || plan.streams == 0) {
    error = "the plan has no ranks or no streams";
    return false;
  }
  if (plan.worldSize > kMaxRanks || plan.streams > kMaxStreams) {
    error = "the plan has " + std::to_string(plan.worldSize) + " ranks and " +
            std::to_string(plan.streams) + " streams; at most " + std::to_string(kMaxRanks) +
            " and " + std::to_string(kMaxStreams) + " can be run";
    return false;
  }
  if (!validateMesh(plan, error))
    return false;
  std::unordered_map<std::string, const StateTensor *> params;
  for (const StateTensor &t : plan.state)
    if (t.role == "param")
      params.emplace(t.name, &t);
  for (const StateTensor &t : plan.state) {
    if (!boundedBytes(t.shape, dtypeBytes(t.dtype), "state tensor '" + t.name + "'", error))
      return false;
    if (!validateSplit(plan, t.split, t.shape.size(), "state tensor '" + t.name + "'", error))
      return false;
    for (uint32_t stage : t.stages)
      if (stage >= plan.pipelineStages()) {
        error = "state tensor '" + t.name + "' is held by pipeline stage " + std::to_string(stage) +
                " of " + std::to_string(plan.pipelineStages());
        return false;
      }
    if (!validateRole(params, t, error))
      return false;
  }
  auto check = [&](const Program &p, const BufferRef &b, const std::string &what) {
    uint64_t limit = p.arenaBytes;
    if (b.storage == Storage::State) {
      if (b.state >= plan.state.size()) {
        error = what + " refers to state tensor #" + std::to_string(b.state) + " of " +
                std::to_string(plan.state.size());
        return false;
      }
      const StateTensor &t = plan.state[b.state];
      if (!t.stages.empty() && !t.heldBy(p.stage)) {
        error = what + " refers to state tensor '" + t.name + "', which its pipeline stage " +
                std::to_string(p.stage) + " does not hold";
        return false;
      }
      limit = t.bytes();
    }
    if (b.offset > limit || b.bytes > limit - b.offset) {
      error = what + " (bytes " + std::to_string(b.offset) + ".." +
              std::to_string(b.offset + b.bytes) + ") lies outside its buffer of " +
              std::to_string(limit) + " bytes";
      return false;
    }
    return true;
  };
  // The two ends of a transfer, a send and the receives of its tag (in whichever programs),
  // move one element type: a communicator carries bytes, and a receive of another type would
  // read them as that type.
  std::unordered_map<int64_t, std::pair<DType, const Program *>> transferTypes;
  for (const Program &p : plan.programs) {
    if (p.arenaBytes > kMaxTensorBytes) {
      error = "program '" + p.name + "' asks for an arena of " + std::to_string(p.arenaBytes) +
              " bytes, more than a plan may describe (16 TiB)";
      return false;
    }
    for (const std::vector<Port> *ports : {&p.inputs, &p.outputs})
      for (const Port &port : *ports)
        if (!boundedBytes(port.shape, 4, "port '" + port.name + "' of '" + p.name + "'", error))
          return false;
    if (p.stage >= plan.pipelineStages()) {
      error = "program '" + p.name + "' is for pipeline stage " + std::to_string(p.stage) + " of " +
              std::to_string(plan.pipelineStages());
      return false;
    }
    for (const Port &port : p.inputs)
      if (!check(p, port.buffer, "input '" + port.name + "' of '" + p.name + "'") ||
          !validateSplit(plan, port.split, port.shape.size(),
                         "input '" + port.name + "' of '" + p.name + "'", error))
        return false;
    for (const Port &port : p.outputs)
      if (!check(p, port.buffer, "output '" + port.name + "' of '" + p.name + "'") ||
          !validateSplit(plan, port.split, port.shape.size(),
                         "output '" + port.name + "' of '" + p.name + "'", error))
        return false;
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const ArenaBuffer &b = p.buffers[i];
      const std::string what = "buffer " + std::to_string(i) + " of '" + p.name + "'";
      if (b.offset > p.arenaBytes || b.bytes > p.arenaBytes - b.offset) {
        error = what + " (bytes " + std::to_string(b.offset) + ".." +
                std::to_string(b.offset + b.bytes) + ") lies outside the arena of " +
                std::to_string(p.arenaBytes) + " bytes";
        return false;
      }
      if (b.first > b.last || b.last >= p.instrs.size()) {
        error = what + " holds its value from instruction " + std::to_string(b.first) + " to " +
                std::to_string(b.last) + ", but the program has " +
                std::to_string(p.instrs.size()) + " instructions";
        return false;
      }
    }
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      const Instr &in = p.instrs[i];
      std::string what = "operand of instruction " + std::to_string(i) + " (" + in.kernel +
                         ") in '" + p.name + "'";
      for (const BufferRef &b : in.inputs)
        if (!check(p, b, what))
          return false;
      for (const BufferRef &b : in.outputs)
        if (!check(p, b, what))
          return false;
      if (in.stream >= plan.streams) {
        error = what + " uses stream " + std::to_string(in.stream);
        return false;
      }
      const Attr *tag = in.find("tag");
      const std::vector<BufferRef> &data = in.kernel == "send" ? in.inputs : in.outputs;
      if ((in.kernel == "send" || in.kernel == "recv") && tag && !data.empty() &&
          std::holds_alternative<int64_t>(tag->value)) {
        auto [end, fresh] =
            transferTypes.try_emplace(std::get<int64_t>(tag->value), data.front().dtype, &p);
        if (!fresh && end->second.first != data.front().dtype) {
          error = "instruction " + std::to_string(i) + " (" + in.kernel + ") in '" + p.name +
                  "' moves " + dtypeName(data.front().dtype) + " with tag " +
                  std::to_string(std::get<int64_t>(tag->value)) + ", which '" +
                  end->second.second->name + "' moves as " + dtypeName(end->second.first);
          return false;
        }
      }
      for (const char *key : {"group", "row_group", "col_group", "head_group"}) {
        const Attr *a = in.find(key);
        if (a && std::holds_alternative<std::string>(a->value) &&
            !plan.groupNamed(std::get<std::string>(a->value))) {
          error = "instruction " + std::to_string(i) + " (" + in.kernel + ") in '" + p.name +
                  "' names group '" + std::get<std::string>(a->value) +
                  "', which the plan does not have";
          return false;
        }
      }
    }
  }
  if (!validateProgramStages(plan, error))
    return false;
  // The decode plan runs on the same ranks, laid out the same way.
  if (plan.decoder) {
    const Plan &d = *plan.decoder;
    bool sameMesh = d.worldSize == plan.worldSize && d.mesh.size() == plan.mesh.size();
    for (size_t i = 0; sameMesh && i < d.mesh.size(); ++i)
      sameMesh = d.mesh[i].name == plan.mesh[i].name && d.mesh[i].size == plan.mesh[i].size;
    if (!sameMesh) {
      error = "its decode plan is laid out on another mesh than the plan";
      return false;
    }
    if (!validatePlan(d, error)) {
      error = "its decode plan: " + error;
      return false;
    }
  }
  return true;
}

} // namespace tessel::planfile
