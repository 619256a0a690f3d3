//===- StepTime.cpp - How long a plan's training step takes on a cluster --===//
//
// The step of a plan on a cluster, assembled from the times of the programs its ranks run
// (ProgramTime.h): without a pipeline, the forward-backward program once per accumulated
// micro-batch and the optimizer step; with one, each chunk's forward and backward programs and
// the messages between stages, laid out by simulating the pipeline's schedule, the slowest
// stage deciding the step. StepTimeReport.cpp prints the prediction.
//
//===----------------------------------------------------------------------===//

#include "tessel/Analysis/StepTime.h"

#include "ProgramTime.h"

#include "tessel/Analysis/CostModel.h"

#include "common/layout/PipelineLayout.h"
#include "common/schedule/Schedule.h"

#include <algorithm>
#include <memory>

using namespace tessel;
namespace pf = tessel::planfile;
namespace cl = tessel::cluster;
using steptime::Model;
using steptime::ProgramTime;

StepFlops tessel::countStepFlops(const pf::Plan &plan) {
  // Counting does not depend on the rates: any cluster with fused attention (whose FLOPs are
  // those of the causal or windowed scores, not of the whole s x s square) counts the same.
  cl::Cluster unit;
  unit.name = "unit";
  unit.peak16 = unit.peak32 = unit.memoryBandwidth = 1e12;
  unit.intra = unit.inter = {1e9, 1e-6};
  unit.gemm.points = unit.attention.points = {{1, 1}};
  StepPrediction p = predictStep(plan, unit);
  return {p.modelFlops, p.hardwareFlops};
}

namespace {

/// The whole size of the `tokens` port of `program` (its dims times the groups splitting
/// them): the tokens one run of the program trains on, over all ranks.
double tokensOf(const pf::Plan &plan, const std::string &program) {
  const pf::Program *p = plan.findProgram(program);
  if (!p)
    return 0;
  for (const pf::Port &port : p->inputs) {
    if (port.name != "tokens")
      continue;
    double n = 1;
    for (size_t d = 0; d < port.shape.size(); ++d) {
      n *= static_cast<double>(port.shape[d]);
      if (d < port.split.size() && !port.split[d].empty())
        if (const pf::Group *g = plan.groupNamed(port.split[d]))
          n *= plan.groupSize(*g);
    }
    return n;
  }
  return 0;
}

} // namespace

std::vector<double> tessel::instructionSeconds(const pf::Plan &plan, const cl::Cluster &cluster,
                                               const pf::Program &program, uint32_t rank) {
  Model model(plan, cluster);
  std::vector<double> ends = model.time(program, rank).ends, seconds(ends.size());
  for (size_t i = 0; i < ends.size(); ++i)
    seconds[i] = ends[i] - (i ? ends[i - 1] : 0.0);
  return seconds;
}

StepPrediction tessel::predictStep(const pf::Plan &plan, const cl::Cluster &cluster) {
  StepPrediction out;
  out.cluster = cluster.name;
  Model model(plan, cluster);
  const std::vector<std::vector<uint32_t>> ranksByStage = plan.ranksByStage();
  int64_t accumulation = 1;
  if (const pf::Attr *a = plan.findConfig("train.accumulation"))
    if (auto n = std::get_if<int64_t>(&a->value))
      accumulation = std::max<int64_t>(*n, 1);

  std::string error;
  std::unique_ptr<pipeline::PipelineLayout> layout = pipeline::PipelineLayout::create(plan, error);
  double stepFlopsModel = 0, stepFlopsHardware = 0;
  if (!layout) {
    uint32_t rank = ranksByStage.front().front();
    ProgramTime fb = model.timeOf("forward_backward", 0, rank);
    ProgramTime opt = model.timeOf("optimizer_step", 0, rank);
    ProgramTime step;
    step.add(fb, static_cast<double>(accumulation));
    StepBreakdown &b = out.breakdown;
    b.compute = step.compute;
    b.recompute = step.recompute;
    b.exposed = step.exposed;
    b.hidden = step.hidden + opt.hidden;
    b.optimizer = opt.compute + opt.recompute;
    for (const auto &[g, t] : opt.exposed)
      b.exposed[g] += t;
    out.step = step.total + opt.total;
    step.add(opt, 1);
    out.kernels = step.kernels;
    out.kernelsRank = rank;
    stepFlopsModel = step.modelFlops * plan.worldSize;
    stepFlopsHardware = step.hardwareFlops * plan.worldSize;
    out.tokens = tokensOf(plan, "forward_backward") * static_cast<double>(accumulation);
  } else {
    out.pipelined = true;
    const pipeline::PipelineConfig &config = layout->config();
    const pipeline::PipelineChain &chain = layout->step();
    int p = config.stages, m = config.microbatches, v = config.virtualStages;
    int chunks = config.chunks();
    // Per chunk: its forward and backward programs' times on the first rank of its stage.
    std::vector<pipeline::Costs> costs(static_cast<size_t>(chunks));
    std::vector<ProgramTime> perChunk(static_cast<size_t>(chunks));
    for (int c = 0; c < chunks; ++c) {
      uint32_t stage = static_cast<uint32_t>(c % p);
      uint32_t rank = ranksByStage[stage].front();
      pipeline::Costs &k = costs[static_cast<size_t>(c)];
      k.forward = k.backward = k.backwardInput = k.backwardWeight = 0;
      std::string forward; // the chunk's forward program, whose layers a replay runs again
      for (const std::string &name : chain.programs[static_cast<size_t>(c)])
        if (name.rfind("forward", 0) == 0)
          forward = name;
      for (const std::string &name : chain.programs[static_cast<size_t>(c)]) {
        ProgramTime t = model.timeOf(name, stage, rank, name == forward ? "" : forward);
        double stash = model.stashTime(name, stage);
        if (stash > 0) {
          t.total += stash;
          t.compute += stash;
          t.kernels["(pipeline stash copies)"].seconds += stash;
          t.kernels["(pipeline stash copies)"].calls += 1;
        }
        perChunk[static_cast<size_t>(c)].add(t, 1);
        if (name.rfind("forward", 0) == 0)
          k.forward += t.total;
        else if (name.rfind("backward_input", 0) == 0)
          k.backwardInput += t.total;
        else if (name.rfind("backward_weight", 0) == 0)
          k.backwardWeight += t.total;
        else
          k.backward += t.total;
      }
      if (config.schedule != pipeline::ScheduleKind::ZBH1)
        k.backward += k.backwardInput + k.backwardWeight;
      // One message to the neighbouring stage: its activations forward, its input's gradient
      // back; the larger of the two, over the link the pp group crosses.
      int64_t elements = 0;
      if (c + 1 < chunks)
        elements = chain.messageElements(chain.activations[static_cast<size_t>(c)]);
      if (c > 0)
        elements =
            std::max(elements, chain.messageElements(chain.gradients[static_cast<size_t>(c)]));
      const cl::Link &link = model.linkOf("pp", rank);
      if (elements > 0)
        k.transfer =
            cost::send(cluster, link, static_cast<double>(elements) * model.elementBytes());
    }
    std::vector<std::vector<pipeline::Action>> lists;
    for (int s = 0; s < p; ++s)
      lists.push_back(layout->actions(static_cast<uint32_t>(s)));
    out.timeline = pipeline::simulate(config.schedule, p, m, v, lists, costs);
    // The slowest stage: the pipeline's end plus its optimizer step.
    double worst = -1;
    for (int s = 0; s < p; ++s) {
      uint32_t rank = ranksByStage[static_cast<size_t>(s)].front();
      ProgramTime opt = model.timeOf("optimizer_step", static_cast<uint32_t>(s), rank);
      double end = 0, pp = 0; // the stage's last action, and its time spent sending
      for (const pipeline::TimedAction &a : out.timeline.actions)
        if (a.rank == s) {
          end = std::max(end, a.end);
          if (a.action.kind == pipeline::Action::SendActivation ||
              a.action.kind == pipeline::Action::SendGrad)
            pp += a.end - a.start;
        }
      ProgramTime work;
      for (int c = s; c < chunks; c += p)
        work.add(perChunk[static_cast<size_t>(c)], m);
      stepFlopsModel += work.modelFlops * static_cast<double>(ranksByStage[s].size());
      stepFlopsHardware += work.hardwareFlops * static_cast<double>(ranksByStage[s].size());
      double step = end + opt.total;
      if (step <= worst)
        continue;
      worst = step;
      StepBreakdown b;
      b.compute = work.compute;
      b.recompute = work.recompute;
      b.exposed = work.exposed;
      b.hidden = work.hidden + opt.hidden;
      if (pp > 0)
        b.exposed["pp"] += pp;
      b.optimizer = opt.compute + opt.recompute;
      for (const auto &[g, t] : opt.exposed)
        b.exposed[g] += t;
      // What the stage's own work does not fill of the pipeline's span is bubble.
      b.bubble = std::max(0.0, out.timeline.makespan - work.total - pp);
      out.breakdown = b;
      work.add(opt, 1);
      out.kernels = work.kernels;
      out.kernelsRank = rank;
    }
    out.step = worst;
    out.tokens = tokensOf(plan, "forward.0") * static_cast<double>(m);
  }
  double peak = cluster.peak(model.elementBytes());
  out.modelFlops = stepFlopsModel;
  out.hardwareFlops = stepFlopsHardware;
  if (out.step > 0) {
    out.tokensPerSecond = out.tokens / out.step;
    out.mfu = stepFlopsModel / (plan.worldSize * peak * out.step);
    out.hfu = stepFlopsHardware / (plan.worldSize * peak * out.step);
    out.flopsPerRank = stepFlopsHardware / plan.worldSize / out.step;
  }
  return out;
}
