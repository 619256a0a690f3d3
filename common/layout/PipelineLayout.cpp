//===- PipelineLayout.cpp - What a pipelined plan runs where --------------===//

#include "common/layout/PipelineLayout.h"

#include <algorithm>
#include <set>

namespace tessel::pipeline {

using planfile::Plan;

namespace {

/// A config entry as an integer; `fallback` when absent, false if it is not an integer.
bool configInt(const Plan &plan, const std::string &name, int &out, int fallback,
               std::string &error) {
  const planfile::Attr *a = plan.findConfig(name);
  if (!a) {
    out = fallback;
    return true;
  }
  if (!std::holds_alternative<int64_t>(a->value) || std::get<int64_t>(a->value) < 1 ||
      std::get<int64_t>(a->value) > (int64_t(1) << 20)) {
    error = "the plan's " + name + " is not a positive integer";
    return false;
  }
  out = static_cast<int>(std::get<int64_t>(a->value));
  return true;
}

/// The most elements a value may have (as a state tensor's dims).
constexpr int64_t kMaxElements = int64_t(1) << 40;

std::string describeShape(const std::vector<int64_t> &shape, planfile::DType type) {
  std::string s = std::string(planfile::dtypeName(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The programs of chunk `c` for a chain of `kind`; the first sends activations forward, the
/// second (a step's) sends gradients back.
std::vector<std::string> chunkPrograms(const std::string &kind, pipeline::ScheduleKind schedule,
                                       int c) {
  std::string n = "." + std::to_string(c);
  if (kind != "step")
    return {kind + n};
  if (schedule == pipeline::ScheduleKind::ZBH1)
    return {"forward" + n, "backward_input" + n, "backward_weight" + n};
  return {"forward" + n, "backward" + n};
}

/// The first version of program `name` in `plan` (every rank of its stage has one, with the
/// same ports).
const planfile::Program *anyVersion(const Plan &plan, const std::string &name) {
  for (const planfile::Program &p : plan.programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

/// Finds the values of a chain and the messages that carry them; false with the first
/// inconsistency.
bool buildChain(const Plan &plan, const PipelineConfig &config, const std::string &kind,
                PipelineChain &chain, std::string &error) {
  const int chunks = config.chunks();
  chain.kind = kind;
  chain.activations.assign(chunks, {});
  chain.gradients.assign(chunks, {});
  std::map<std::string, int> chunkOfProgram;
  for (int c = 0; c < chunks; ++c) {
    chain.programs.push_back(chunkPrograms(kind, config.schedule, c));
    for (const std::string &name : chain.programs.back()) {
      if (!anyVersion(plan, name)) {
        error = "the plan has no program '" + name + "', which its " +
                pipeline::scheduleKindName(config.schedule) + " pipeline of " +
                std::to_string(chunks) + " chunks runs";
        return false;
      }
      chunkOfProgram[name] = c;
    }
  }

  // Every version of every port of a value, on every rank, has one shape and type.
  struct Seen {
    std::vector<int64_t> shape;
    planfile::DType type;
    std::string where;
  };
  std::map<std::string, Seen> seen;
  for (const planfile::Program &p : plan.programs) {
    if (!chunkOfProgram.count(p.name))
      continue;
    for (const auto *ports : {&p.inputs, &p.outputs})
      for (const planfile::Port &port : *ports) {
        if (isHostInput(port.name))
          continue;
        std::string where = "'" + p.name + "' on stage " + std::to_string(p.stage);
        // Values are copied by their shape: the port's buffer must hold them.
        int64_t n = 1;
        for (int64_t d : port.shape)
          n = d < 1 || d > kMaxElements || n > kMaxElements / d ? kMaxElements + 1 : n * d;
        const uint64_t bytes = static_cast<uint64_t>(n) * planfile::dtypeBytes(port.dtype);
        if (n > kMaxElements || bytes > port.buffer.bytes) {
          error = "port '" + port.name + "' of " + where + " has " +
                  std::to_string(port.buffer.bytes) + " bytes for a value of shape " +
                  describeShape(port.shape, port.dtype);
          return false;
        }
        auto [it, fresh] = seen.try_emplace(port.name, Seen{port.shape, port.dtype, where});
        if (!fresh && (it->second.shape != port.shape || it->second.type != port.dtype)) {
          error = "value '" + port.name + "' is " +
                  describeShape(it->second.shape, it->second.type) + " in " + it->second.where +
                  " but " + describeShape(port.shape, port.dtype) + " in " + where;
          return false;
        }
        chain.elements[port.name] = n;
        chain.bytes[port.name] = bytes;
      }
  }

  // One writer per value; each reader on the writer's chunk, or on the next (after a forward
  // pass) or the previous (after a backward pass).
  std::map<std::string, std::string> writer;
  for (const auto &[name, c] : chunkOfProgram)
    for (const planfile::Port &port : anyVersion(plan, name)->outputs) {
      auto [it, fresh] = writer.try_emplace(port.name, name);
      if (!fresh) {
        error =
            "value '" + port.name + "' is written by both '" + it->second + "' and '" + name + "'";
        return false;
      }
    }
  std::vector<std::set<std::string>> activations(chunks), gradients(chunks);
  for (const auto &[name, d] : chunkOfProgram)
    for (const planfile::Port &port : anyVersion(plan, name)->inputs) {
      if (isHostInput(port.name))
        continue;
      auto it = writer.find(port.name);
      if (it == writer.end()) {
        error = "'" + name + "' reads value '" + port.name + "', which no program of the " + kind +
                " writes";
        return false;
      }
      const int c = chunkOfProgram[it->second];
      const std::vector<std::string> &own = chain.programs[c];
      if (c == d)
        continue;
      if (d == c + 1 && it->second == own[0]) {
        activations[c].insert(port.name);
        continue;
      }
      if (d == c - 1 && own.size() > 1 && it->second == own[1]) {
        gradients[c].insert(port.name);
        continue;
      }
      error = "'" + name + "' reads value '" + port.name + "' from '" + it->second +
              "': values travel only from a forward pass to the next chunk and from a backward "
              "pass to the previous one";
      return false;
    }
  for (int c = 0; c < chunks; ++c) {
    chain.activations[c].assign(activations[c].begin(), activations[c].end());
    chain.gradients[c].assign(gradients[c].begin(), gradients[c].end());
  }
  return true;
}

/// Every pipeline program of the plan is one the config's chains run.
bool checkProgramNames(const Plan &plan, const PipelineConfig &config, std::string &error) {
  static const std::set<std::string> kinds = {"forward",         "backward", "backward_input",
                                              "backward_weight", "eval",     "sample"};
  for (const planfile::Program &p : plan.programs) {
    uint32_t chunk = 0;
    if (!planfile::pipelineChunkOf(p.name, chunk))
      continue;
    if (!kinds.count(p.name.substr(0, p.name.rfind('.')))) {
      error = "program '" + p.name + "' is no kind of pipeline program (forward, backward, " +
              "backward_input, backward_weight, eval, sample)";
      return false;
    }
    if (chunk >= static_cast<uint32_t>(config.chunks())) {
      error = "program '" + p.name + "' is for chunk " + std::to_string(chunk) +
              ", but the pipeline has " + std::to_string(config.chunks()) + " chunks";
      return false;
    }
  }
  return true;
}

} // namespace

bool readPipelineConfig(const Plan &plan, PipelineConfig &config, std::string &error) {
  config = PipelineConfig();
  if (!configInt(plan, "pipeline.stages", config.stages, 1, error) ||
      !configInt(plan, "pipeline.microbatches", config.microbatches, 1, error) ||
      !configInt(plan, "pipeline.virtual", config.virtualStages, 1, error))
    return false;
  if (!config.enabled())
    return true;
  const planfile::Attr *schedule = plan.findConfig("pipeline.schedule");
  if (!schedule || !std::holds_alternative<std::string>(schedule->value) ||
      !pipeline::parseScheduleKind(std::get<std::string>(schedule->value), config.schedule)) {
    error = "the plan's pipeline.schedule is not one of " + pipeline::scheduleKindList();
    return false;
  }
  return true;
}

bool isHostInput(const std::string &port) { return port == "tokens" || port == "targets"; }
bool isHostOutput(const std::string &port) { return port == "loss" || port == "logits"; }

int64_t PipelineChain::messageElements(const std::vector<std::string> &ports) const {
  int64_t n = 0;
  for (const std::string &port : ports)
    n += elements.at(port);
  return n;
}

uint64_t PipelineChain::messageBytes(const std::vector<std::string> &ports) const {
  uint64_t n = 0;
  for (const std::string &port : ports)
    n += bytes.at(port);
  return n;
}

std::unique_ptr<PipelineLayout> PipelineLayout::create(const Plan &plan, std::string &error) {
  error.clear();
  std::unique_ptr<PipelineLayout> layout(new PipelineLayout());
  PipelineConfig &config = layout->config_;
  if (!readPipelineConfig(plan, config, error) || !config.enabled())
    return nullptr;
  const int p = config.stages;
  if (plan.pipelineStages() != static_cast<uint32_t>(p)) {
    error = "the plan's pipeline has " + std::to_string(p) + " stages but its group 'pp' " +
            (plan.groupNamed("pp") ? "has " + std::to_string(plan.pipelineStages()) + " ranks"
                                   : std::string("is missing"));
    return nullptr;
  }
  std::string why;
  layout->lists_ =
      pipeline::buildSchedule(config.schedule, p, config.microbatches, config.virtualStages, why);
  if (layout->lists_.empty() ||
      !pipeline::checkSchedule(config.schedule, p, config.microbatches, config.virtualStages,
                               layout->lists_, why)) {
    error = "the plan's pipeline schedule cannot run: " + why;
    return nullptr;
  }
  if (!checkProgramNames(plan, config, error) ||
      !buildChain(plan, config, "step", layout->step_, error))
    return nullptr;
  for (const char *kind : {"eval", "sample"}) {
    if (!anyVersion(plan, std::string(kind) + ".0"))
      continue;
    if (!buildChain(plan, config, kind, layout->chains_[kind], error))
      return nullptr;
  }

  for (uint32_t r = 0; r < plan.worldSize; ++r)
    layout->instanceOf_.push_back(plan.findGroup("pp", r)->ranks);
  layout->recorded_ = layout->instanceOf_[0];
  layout->outputRank_ = plan.worldSize;
  for (uint32_t r = 0; r < plan.worldSize; ++r)
    if (plan.pipelineStage(r) == static_cast<uint32_t>(p - 1))
      layout->outputRank_ = std::min(layout->outputRank_, r);
  return layout;
}

const PipelineChain *PipelineLayout::chain(const std::string &kind) const {
  auto it = chains_.find(kind);
  return it == chains_.end() ? nullptr : &it->second;
}

int PipelineLayout::chunkOf(uint32_t stage, int local) const {
  return local * config_.stages + static_cast<int>(stage);
}

uint32_t PipelineLayout::peerOf(uint32_t rank, uint32_t stage) const {
  return instanceOf_[rank][stage];
}

} // namespace tessel::pipeline
