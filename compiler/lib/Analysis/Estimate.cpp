//===- Estimate.cpp - Memory and communication a plan implies -------------===//

#include "tessel/Analysis/Estimate.h"

#include "common/layout/PipelineLayout.h"
#include "common/layout/PipelineWalk.h"
#include "common/memory/MemoryProfile.h"
#include "common/schedule/Schedule.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <utility>

using namespace tessel;
namespace pf = tessel::planfile;

namespace {

double elements(const std::vector<int64_t> &shape) {
  double n = 1;
  for (int64_t d : shape)
    n *= static_cast<double>(d);
  return n;
}

int64_t intAttr(const pf::Instr &instr, const char *name) {
  const pf::Attr *a = instr.find(name);
  return a && std::holds_alternative<int64_t>(a->value) ? std::get<int64_t>(a->value) : 0;
}

std::string stringAttr(const pf::Instr &instr, const char *name) {
  const pf::Attr *a = instr.find(name);
  return a && std::holds_alternative<std::string>(a->value) ? std::get<std::string>(a->value)
                                                            : std::string();
}

/// Whether two ranks' figures are the same in every column the table shows.
bool sameFigures(const RankEstimate &a, const RankEstimate &b) {
  return a.parameters == b.parameters && a.gradients == b.gradients && a.optimizer == b.optimizer &&
         a.activations == b.activations && a.stash == b.stash && a.inFlight == b.inFlight &&
         a.inferenceWeights == b.inferenceWeights && a.kvBytesPerToken == b.kvBytesPerToken;
}

/// The ranks of `ranks` as runs of consecutive ranks with the same figures, each [first, last]
/// by index. With pp the outermost mesh axis, each pipeline stage's ranks are one run.
std::vector<std::pair<size_t, size_t>> runsOfSameFigures(const std::vector<RankEstimate> &ranks) {
  std::vector<std::pair<size_t, size_t>> runs;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!runs.empty() && ranks[i].rank == ranks[i - 1].rank + 1 &&
        sameFigures(ranks[i], ranks[runs.back().second]))
      runs.back().second = i;
    else
      runs.push_back({i, i});
  }
  return runs;
}

/// "3", or "0-127" for a run of ranks.
std::string rankRange(const std::vector<RankEstimate> &ranks, std::pair<size_t, size_t> run) {
  std::string first = std::to_string(ranks[run.first].rank);
  return run.first == run.second ? first : first + "-" + std::to_string(ranks[run.second].rank);
}

} // namespace

PlanEstimate tessel::estimatePlan(const pf::Plan &plan) {
  PlanEstimate e;
  e.model = plan.model;
  e.worldSize = plan.worldSize;
  e.precision = "fp32";
  if (const pf::Attr *p = plan.findConfig("train.precision"))
    if (auto s = std::get_if<std::string>(&p->value))
      e.precision = *s;
  if (const pf::Attr *a = plan.findConfig("train.accumulation"))
    if (auto n = std::get_if<int64_t>(&a->value))
      e.accumulation = std::max<int64_t>(*n, 1);
  auto configInt = [&](const char *name, int64_t &out) {
    if (const pf::Attr *a = plan.findConfig(name))
      if (auto n = std::get_if<int64_t>(&a->value))
        out = *n;
  };
  auto configDouble = [&](const char *name, double &out) {
    if (const pf::Attr *a = plan.findConfig(name))
      if (auto x = std::get_if<double>(&a->value))
        out = *x;
  };
  if (const pf::Attr *a = plan.findConfig("pipeline.schedule"))
    if (auto s = std::get_if<std::string>(&a->value))
      e.schedule = *s;
  configInt("pipeline.stages", e.stages);
  configInt("pipeline.microbatches", e.microbatches);
  configInt("pipeline.virtual", e.virtualStages);
  configInt("pipeline.in_flight", e.inFlight);
  configDouble("pipeline.bubble", e.bubble);
  configDouble("pipeline.bubble_formula", e.bubbleFormula);

  auto groupSize = [&](const std::string &name) {
    const pf::Group *g = plan.groupNamed(name);
    return g ? static_cast<double>(plan.groupSize(*g)) : 1.0;
  };

  // The micro-batches (of one model chunk) whose activations each pipeline rank holds at most.
  std::vector<int> inFlight;
  pipeline::ScheduleKind kind;
  if (e.stages > 1 && pipeline::parseScheduleKind(e.schedule, kind)) {
    std::string error;
    auto lists =
        pipeline::buildSchedule(kind, static_cast<int>(e.stages), static_cast<int>(e.microbatches),
                                static_cast<int>(e.virtualStages), error);
    if (error.empty())
      inFlight =
          pipeline::simulate(kind, static_cast<int>(e.stages), static_cast<int>(e.microbatches),
                             static_cast<int>(e.virtualStages), lists)
              .peakInFlight;
  }
  std::string layoutError;
  std::unique_ptr<pipeline::PipelineLayout> layout =
      e.stages > 1 ? pipeline::PipelineLayout::create(plan, layoutError) : nullptr;
  auto chunks = e.stages * e.virtualStages;

  // Every rank of a pipeline stage holds state of the same shapes and runs the same programs
  // (what differs between them follows from their place in the groups), so one rank per stage,
  // its first, stands for all of them: the estimate's cost does not grow with dp or tp.
  const std::vector<std::vector<uint32_t>> ranksByStage = plan.ranksByStage();
  std::vector<RankEstimate> perStage;
  std::map<std::string, double> sent; // Per group, the most a stage's rank sends.
  // The programs that run once per micro-batch: the training step's, or a pipeline's stage
  // programs as the runtime's layout finds them.
  std::set<std::string> perMicroBatch = {"forward_backward"};
  if (layout)
    for (const std::vector<std::string> &chunk : layout->step().programs)
      perMicroBatch.insert(chunk.begin(), chunk.end());
  for (size_t stage = 0; stage < ranksByStage.size(); ++stage) {
    const uint32_t rank = ranksByStage[stage].front();
    RankEstimate r;
    r.rank = rank;
    r.stage = static_cast<int64_t>(stage);
    double masters = 0, working = 0;
    for (const pf::StateTensor &t : plan.state) {
      if (!t.heldBy(static_cast<uint32_t>(stage)))
        continue;
      // The bytes the plan allocates, at the tensor's own element type: under mixed
      // precision the parameters are the fp32 master weights and their persistent 16-bit
      // working copies, and the gradients are accumulated in fp32.
      const double bytes = static_cast<double>(t.bytes());
      if (t.role == "param")
        masters += bytes;
      else if (t.role == "working")
        working += bytes;
      else if (t.role == "grad")
        r.gradients += bytes;
      else
        r.optimizer += bytes; // adam_m, adam_v, momentum
    }
    r.parameters = masters + working;
    // A forward pass reads the 16-bit working copies, or without them the parameters.
    r.inferenceWeights = working > 0 ? working : masters;
    std::map<std::string, double> bytesSent;
    for (const pf::Program &p : plan.programs) {
      if (p.stage != stage)
        continue;
      // The KV cache: each attention call of the training step's forward pass keeps its
      // keys and values per token, at their element type.
      if (perMicroBatch.count(p.name))
        for (const pf::Instr &in : p.instrs)
          if (in.kernel == "attention" && in.inputs.size() >= 3) {
            r.kvBytesPerToken += 2.0 * static_cast<double>(intAttr(in, "kv_heads")) *
                                 static_cast<double>(intAttr(in, "head")) *
                                 static_cast<double>(pf::dtypeBytes(in.inputs[1].dtype));
            ++r.attentionLayers;
          }
      r.activations = std::max(r.activations, static_cast<double>(p.arenaBytes));
      double runs = perMicroBatch.count(p.name)  ? static_cast<double>(e.accumulation)
                    : p.name == "optimizer_step" ? 1.0
                                                 : 0.0;
      if (runs == 0)
        continue;
      for (const pf::Instr &in : p.instrs) {
        std::string group = stringAttr(in, "group");
        if (group.empty() || in.kernel == "shard_slice")
          continue;
        double k = groupSize(group);
        if (const pf::Attr *members = in.find("members"))
          if (auto list = std::get_if<std::vector<int64_t>>(&members->value))
            k = static_cast<double>(list->size());
        // Collectives move their operands' element type (f32 under mixed precision too:
        // gradients are reduced in fp32).
        const pf::BufferRef *operand = !in.inputs.empty()    ? &in.inputs.front()
                                       : !in.outputs.empty() ? &in.outputs.front()
                                                             : nullptr;
        const double elementBytes =
            operand ? static_cast<double>(pf::dtypeBytes(operand->dtype)) : 4;
        double bytes = 0;
        if (in.kernel == "all_reduce")
          bytes = 2 * (k - 1) / k * static_cast<double>(intAttr(in, "n")) * elementBytes;
        else if (in.kernel == "all_gather" || in.kernel == "reduce_scatter" ||
                 in.kernel == "all_to_all")
          bytes = (k - 1) / k * static_cast<double>(intAttr(in, "outer") * intAttr(in, "chunk")) *
                  k * elementBytes;
        else if (in.kernel == "broadcast" || in.kernel == "send")
          bytes = static_cast<double>(intAttr(in, "n")) * elementBytes;
        bytesSent[group] += bytes * runs;
      }
    }
    if (layout && stage < inFlight.size()) {
      // The stash: what the rank keeps between its actions, walked through its action list
      // as the runtime walks it before a run.
      std::string error;
      uint64_t stash = 0;
      if (pipeline::peakStashBytes(*layout, plan, rank, stash, error))
        r.stash = static_cast<double>(stash);
      r.inFlight = inFlight[stage];
      r.activations += r.stash;
      // Pipeline messages: per micro-batch, each chunk's activations forward and its input's
      // gradient back, to the neighbouring stage, as the runtime's layout says.
      const pipeline::PipelineChain &step = layout->step();
      for (int64_t c = r.stage; c < chunks; c += e.stages) {
        uint64_t bytes = 0;
        if (c + 1 < chunks)
          bytes += step.messageBytes(step.activations[c]);
        if (c > 0)
          bytes += step.messageBytes(step.gradients[c]);
        bytesSent["pp"] += static_cast<double>(bytes) * static_cast<double>(e.microbatches);
      }
    }
    for (const auto &[group, bytes] : bytesSent)
      sent[group] = std::max(sent[group], bytes);
    perStage.push_back(r);
  }
  std::vector<int64_t> stageOf(plan.worldSize, 0);
  for (size_t stage = 0; stage < ranksByStage.size(); ++stage)
    for (uint32_t rank : ranksByStage[stage])
      stageOf[rank] = static_cast<int64_t>(stage);
  for (uint32_t rank = 0; rank < plan.worldSize; ++rank) {
    e.ranks.push_back(perStage[stageOf[rank]]);
    e.ranks.back().rank = rank;
  }
  for (const pf::StateTensor &t : plan.state) {
    if (t.role != "param")
      continue;
    double n = elements(t.shape);
    for (const std::string &g : t.split)
      if (!g.empty())
        n *= groupSize(g);
    e.parameterCount += n;
  }
  e.communication = sent;
  return e;
}

std::string tessel::formatEstimate(const PlanEstimate &e) {
  std::ostringstream os;
  char line[160];
  os << e.model << ": " << e.worldSize << (e.worldSize == 1 ? " rank" : " ranks") << ", "
     << e.parameterCount << " parameters, precision " << e.precision << ", accumulation "
     << e.accumulation << "\n";
  if (!e.routing.empty())
    os << "mixture of experts (" << e.routing << "): " << e.activeParameterCount
       << " parameters active per token of " << e.parameterCount << "; experts hold "
       << e.expertParameterCount << "\n";
  os << "\n";
  // One row per run of consecutive ranks with the same figures ("0-127"): a layout of
  // thousands of ranks has as many rows as it has different ranks.
  const std::vector<std::pair<size_t, size_t>> runs = runsOfSameFigures(e.ranks);
  std::snprintf(line, sizeof line, "%-11s %14s %14s %16s %14s %14s\n", "rank", "parameters",
                "gradients", "optimizer state", "activations", "peak");
  os << line;
  for (const auto &run : runs) {
    const RankEstimate &r = e.ranks[run.first];
    std::snprintf(line, sizeof line, "%-11s %14s %14s %16s %14s %14s\n",
                  rankRange(e.ranks, run).c_str(), memory::humanBytes(r.parameters).c_str(),
                  memory::humanBytes(r.gradients).c_str(), memory::humanBytes(r.optimizer).c_str(),
                  memory::humanBytes(r.activations).c_str(), memory::humanBytes(r.peak()).c_str());
    os << line;
  }
  if (!e.schedule.empty()) {
    std::snprintf(line, sizeof line,
                  "\npipeline: %s, %lld stages x %lld virtual, %lld micro-batches: bubble %.4f "
                  "of compute time",
                  e.schedule.c_str(), static_cast<long long>(e.stages),
                  static_cast<long long>(e.virtualStages), static_cast<long long>(e.microbatches),
                  e.bubble);
    os << line;
    if (e.bubbleFormula >= 0) {
      std::snprintf(line, sizeof line, " (formula %.4f)", e.bubbleFormula);
      os << line;
    }
    os << ", at most " << e.inFlight << " micro-batches (per model chunk) in flight per rank\n";
    os << "activations include the stash of the micro-batches in flight:";
    for (size_t i = 0; i < runs.size(); ++i) {
      const RankEstimate &r = e.ranks[runs[i].first];
      os << (i ? "," : "") << (runs[i].first == runs[i].second ? " rank " : " ranks ")
         << rankRange(e.ranks, runs[i]) << " " << r.inFlight << " (" << memory::humanBytes(r.stash) << ")";
    }
    os << "\n";
  }
  os << "\ncommunication per rank per optimizer step (ring collectives):\n";
  if (e.communication.empty())
    os << "  none\n";
  for (const auto &[group, bytes] : e.communication) {
    std::snprintf(line, sizeof line, "  %-8s %14s\n", group.c_str(), memory::humanBytes(bytes).c_str());
    os << line;
  }
  // Generation's KV cache, per run of ranks with the same figure.
  bool cached = false;
  for (const RankEstimate &r : e.ranks)
    cached = cached || r.kvBytesPerToken > 0;
  if (cached) {
    os << "\ngeneration (KV cache per token: 2 x kv heads x head x bytes per attention layer):\n";
    std::snprintf(line, sizeof line, "%-11s %14s %17s %14s\n", "rank", "KV per token",
                  "attention layers", "weights");
    os << line;
    for (const auto &run : runs) {
      const RankEstimate &r = e.ranks[run.first];
      std::snprintf(line, sizeof line, "%-11s %14s %17lld %14s\n", rankRange(e.ranks, run).c_str(),
                    memory::humanBytes(r.kvBytesPerToken).c_str(), static_cast<long long>(r.attentionLayers),
                    memory::humanBytes(r.inferenceWeights).c_str());
      os << line;
    }
  }
  return os.str();
}

double tessel::kvCacheTokens(const PlanEstimate &e, double deviceMemory) {
  double fewest = -1;
  for (const RankEstimate &r : e.ranks) {
    if (r.kvBytesPerToken <= 0)
      continue;
    const double tokens = std::max(0.0, std::floor((deviceMemory - r.inferenceWeights) /
                                                   r.kvBytesPerToken));
    fewest = fewest < 0 ? tokens : std::min(fewest, tokens);
  }
  return std::max(fewest, 0.0);
}

std::string tessel::formatKvCacheFit(const PlanEstimate &e, double deviceMemory,
                                     const std::string &device) {
  const double tokens = kvCacheTokens(e, deviceMemory);
  if (tokens <= 0)
    return "";
  std::ostringstream os;
  os << "generation on " << device << " (" << memory::humanBytes(deviceMemory) << " per rank): " << std::fixed
     << std::setprecision(0) << tokens
     << " tokens of KV cache fit beside the weights (sequences x context, e.g. batch "
     << std::max(1.0, std::floor(tokens / 4096)) << " at 4096 tokens; the decode step's own "
     << "activations not counted)\n";
  return os.str();
}

void tessel::estimateJsonMembers(llvm::json::OStream &j, const PlanEstimate &e) {
  j.attribute("model", e.model);
  j.attribute("world_size", static_cast<int64_t>(e.worldSize));
  j.attribute("precision", e.precision);
  j.attribute("accumulation", static_cast<int64_t>(e.accumulation));
  j.attribute("parameter_count", static_cast<double>(e.parameterCount));
  if (!e.routing.empty()) {
    j.attribute("active_parameter_count", static_cast<double>(e.activeParameterCount));
    j.attribute("expert_parameter_count", static_cast<double>(e.expertParameterCount));
    j.attribute("routing", e.routing);
  }
  j.attributeArray("ranks", [&] {
    for (const RankEstimate &r : e.ranks)
      j.object([&] {
        j.attribute("rank", static_cast<int64_t>(r.rank));
        j.attribute("parameters", static_cast<double>(r.parameters));
        j.attribute("gradients", static_cast<double>(r.gradients));
        j.attribute("optimizer", static_cast<double>(r.optimizer));
        j.attribute("activations", static_cast<double>(r.activations));
        j.attribute("stash", static_cast<double>(r.stash));
        j.attribute("stage", static_cast<int64_t>(r.stage));
        j.attribute("in_flight", static_cast<int64_t>(r.inFlight));
        j.attribute("peak", static_cast<double>(r.peak()));
        j.attribute("inference_weights", static_cast<double>(r.inferenceWeights));
        j.attribute("kv_cache_bytes_per_token", static_cast<double>(r.kvBytesPerToken));
      });
  });
  j.attributeObject("communication", [&] {
    for (const auto &[group, bytes] : e.communication)
      j.attribute(group, static_cast<double>(bytes));
  });
  if (!e.schedule.empty())
    j.attributeObject("pipeline", [&] {
      j.attribute("schedule", e.schedule);
      j.attribute("stages", static_cast<int64_t>(e.stages));
      j.attribute("virtual", static_cast<int64_t>(e.virtualStages));
      j.attribute("microbatches", static_cast<int64_t>(e.microbatches));
      j.attribute("bubble", e.bubble);
      j.attribute("in_flight", static_cast<int64_t>(e.inFlight));
      if (e.bubbleFormula >= 0)
        j.attribute("bubble_formula", e.bubbleFormula);
    });
}
