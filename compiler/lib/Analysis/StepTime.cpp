//===- StepTime.cpp - How long a plan's training step takes on a cluster --===//

#include "tessel/Analysis/StepTime.h"

#include "tessel/Analysis/CostModel.h"

#include "common/layout/PipelineLayout.h"
#include "common/schedule/Schedule.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

using namespace tessel;
namespace pf = tessel::planfile;
namespace cl = tessel::cluster;

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

int64_t intAttr(const pf::Instr &instr, const char *name, int64_t otherwise = 0) {
  const pf::Attr *a = instr.find(name);
  return a && std::holds_alternative<int64_t>(a->value) ? std::get<int64_t>(a->value) : otherwise;
}

std::string stringAttr(const pf::Instr &instr, const char *name) {
  const pf::Attr *a = instr.find(name);
  return a && std::holds_alternative<std::string>(a->value) ? std::get<std::string>(a->value)
                                                            : std::string();
}

double product(const pf::Instr &instr, const char *name) {
  double n = 1;
  if (const pf::Attr *a = instr.find(name))
    if (auto list = std::get_if<std::vector<int64_t>>(&a->value))
      for (int64_t d : *list)
        n *= static_cast<double>(d);
  return n;
}

bool isCollective(const std::string &kernel) {
  return kernel == "all_reduce" || kernel == "all_gather" || kernel == "reduce_scatter" ||
         kernel == "all_to_all" || kernel == "broadcast" || kernel == "send" || kernel == "recv";
}

/// A kernel call's kernel and parameters, which a recomputed clone shares with its original
/// (but for which of a fused body's values it writes out: a clone may keep one more for the
/// backward pass).
std::string signatureOf(const pf::Instr &in) {
  std::ostringstream os;
  os << in.kernel;
  for (const pf::Attr &a : in.attrs) {
    if (in.kernel == "fused_elementwise" && a.name == "outputs")
      continue;
    os << ' ' << a.name << '=';
    std::visit(
        [&](const auto &v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            for (int64_t x : v)
              os << x << ',';
          else
            os << v;
        },
        a.value);
  }
  return os.str();
}

/// The time of one program on one rank, split as the breakdown needs it.
struct ProgramTime {
  double total = 0, compute = 0, recompute = 0, hidden = 0;
  /// Per instruction, the time at which it ends (the compute stream's clock then).
  std::vector<double> ends;
  std::map<std::string, double> exposed;
  double modelFlops = 0, hardwareFlops = 0;
  std::map<std::string, KernelCost> kernels;

  void add(const ProgramTime &o, double times) {
    for (const auto &[name, k] : o.kernels) {
      kernels[name].seconds += k.seconds * times;
      kernels[name].calls += k.calls * times;
    }
    total += o.total * times;
    compute += o.compute * times;
    recompute += o.recompute * times;
    hidden += o.hidden * times;
    for (const auto &[g, t] : o.exposed)
      exposed[g] += t * times;
    modelFlops += o.modelFlops * times;
    hardwareFlops += o.hardwareFlops * times;
  }
};

class Model {
public:
  Model(const pf::Plan &plan, const cl::Cluster &c) : plan_(plan), c_(c) {
    std::string precision = "fp32";
    if (const pf::Attr *p = plan.findConfig("train.precision"))
      if (auto s = std::get_if<std::string>(&p->value))
        precision = *s;
    elementBytes_ = precision == "fp32" ? 4 : 2;
    if (const pf::Attr *r = plan.findConfig("parallel.recompute"))
      if (auto s = std::get_if<std::string>(&r->value))
        fullRecompute_ = *s == "full";
  }

  double elementBytes() const { return elementBytes_; }

  /// The link group `name`'s instances use: intra-node when the instance holding `rank` has
  /// all its ranks on one node (ranks are numbered row-major over the mesh and a node holds
  /// perNode consecutive ranks, so tp as the innermost axis stays inside a node). A send uses
  /// it as it is.
  const cl::Link &linkOf(const std::string &name, uint32_t rank) {
    return routeOf(name, rank).crosses ? c_.inter : c_.intra;
  }

  /// The link a ring collective of group `name` runs over from `rank`: the intra link inside a
  /// node; across nodes, the network ports of the group's ranks on each node (cost::crossing).
  cl::Link collectiveLink(const std::string &name, uint32_t rank) {
    Route r = routeOf(name, rank);
    return r.crosses ? cost::crossing(c_, r.perNode) : c_.intra;
  }

  double groupSize(const pf::Instr &in, const std::string &group) const {
    if (const pf::Attr *members = in.find("members"))
      if (auto list = std::get_if<std::vector<int64_t>>(&members->value))
        return static_cast<double>(list->size());
    const pf::Group *g = plan_.groupNamed(group);
    return g ? static_cast<double>(plan_.groupSize(*g)) : 1.0;
  }

  /// α–β time of one collective on `rank`, over the link its group crosses.
  double collectiveTime(const pf::Instr &in, uint32_t rank) {
    std::string group = stringAttr(in, "group");
    double k = groupSize(in, group);
    if (in.kernel == "recv" || k <= 1)
      return 0; // a receive is timed by its send; a group of one moves nothing
    const cl::Link &pair = linkOf(group, rank);
    cl::Link ring = collectiveLink(group, rank);
    // The plan's own element type: under bf16, activations and gathered weights move in 16
    // bits and gradients are reduced in f32.
    const pf::BufferRef &data = in.inputs.empty() ? in.outputs.front() : in.inputs.front();
    const double eb = static_cast<double>(pf::dtypeBytes(data.dtype));
    if (in.kernel == "all_reduce")
      return cost::allReduce(c_, ring, k, static_cast<double>(intAttr(in, "n")) * eb);
    double whole = static_cast<double>(intAttr(in, "outer") * intAttr(in, "chunk")) * k * eb;
    if (in.kernel == "all_gather" || in.kernel == "reduce_scatter")
      return cost::gather(c_, ring, k, whole);
    if (in.kernel == "all_to_all")
      return cost::gather(c_, pair, k, whole);
    if (in.kernel == "broadcast")
      return cost::broadcast(c_, ring, k, static_cast<double>(intAttr(in, "n")) * eb);
    if (in.kernel == "send")
      return cost::send(c_, pair, static_cast<double>(intAttr(in, "n")) * eb);
    return 0;
  }

  /// Roofline time of one kernel call; `flops` receives its GEMM and attention FLOPs.
  double kernelTime(const pf::Instr &in, double &flops) {
    flops = 0;
    if (in.kernel == "gemm") {
      double m = static_cast<double>(intAttr(in, "m")), n = static_cast<double>(intAttr(in, "n")),
             k = static_cast<double>(intAttr(in, "k")), batch = product(in, "batch_shape");
      flops = cost::gemmFlops(m, n, k, batch);
      return cost::gemm(c_, m, n, k, batch, elementBytes_);
    }
    if (in.kernel == "attention" || in.kernel == "attention_grad") {
      double kv = static_cast<double>(intAttr(in, "kv_seq"));
      if (c_.unfusedAttention)
        return cost::unfusedAttention(
            c_, static_cast<double>(intAttr(in, "batch")), static_cast<double>(intAttr(in, "seq")),
            static_cast<double>(intAttr(in, "heads")), kv, static_cast<double>(intAttr(in, "head")),
            in.kernel == "attention_grad", elementBytes_, flops);
      double visible = kv;
      if (intAttr(in, "causal")) {
        double window = static_cast<double>(intAttr(in, "window", 0));
        visible = window > 0 ? std::min(window, kv) : kv / 2;
      }
      auto count = [&](bool backward) {
        return cost::attentionFlops(
            static_cast<double>(intAttr(in, "batch")), static_cast<double>(intAttr(in, "seq")),
            static_cast<double>(intAttr(in, "heads")), visible,
            static_cast<double>(intAttr(in, "head")), backward);
      };
      const bool grad = in.kernel == "attention_grad";
      flops = count(grad);
      // A gradient without the forward call's output and log-sum-exp computes them again.
      if (grad && in.inputs.size() < 6)
        flops += count(false);
      return cost::attention(c_, flops, kv, elementBytes_);
    }
    // Memory-bound: every operand read or written once, at the precision's element size (ids
    // stay 4 bytes).
    double bytes = 0;
    auto add = [&](const std::vector<pf::BufferRef> &refs) {
      for (const pf::BufferRef &r : refs) {
        double elements =
            static_cast<double>(r.bytes) / static_cast<double>(pf::dtypeBytes(r.dtype));
        bytes += elements * (pf::isFloat(r.dtype) ? elementBytes_ : 4.0);
      }
    };
    add(in.inputs);
    add(in.outputs);
    return cost::memoryBound(c_, bytes);
  }

  /// Runs `program` on a compute stream and a communication stream: a collective with an
  /// event runs beside the compute from its start until its `wait`; one without waits for
  /// the communication stream (the communicator runs one rank's operations in issue order)
  /// and blocks the compute stream.
  ProgramTime time(const pf::Program &program, uint32_t rank) {
    ProgramTime t;
    double now = 0, commFree = 0;
    struct Pending {
      double end, duration;
      std::string group;
    };
    std::map<int64_t, Pending> pending;
    auto expose = [&](const Pending &p) {
      double waited = std::max(0.0, p.end - now);
      t.exposed[p.group] += waited;
      t.hidden += p.duration - std::min(waited, p.duration);
      now = std::max(now, p.end);
    };
    t.ends.reserve(program.instrs.size());
    for (const pf::Instr &in : program.instrs) {
      if (&in != &program.instrs.front())
        t.ends.push_back(now); // The previous instruction's end.
      if (isCollective(in.kernel)) {
        double d = collectiveTime(in, rank);
        if (d == 0)
          continue;
        t.kernels[in.kernel].seconds += d;
        t.kernels[in.kernel].calls += 1;
        double start = std::max(now, commFree);
        commFree = start + d;
        std::string group = stringAttr(in, "group");
        if (in.find("event")) {
          pending[intAttr(in, "event")] = {commFree, d, group};
          continue;
        }
        t.exposed[group] += commFree - now;
        now = commFree;
        continue;
      }
      if (in.kernel == "wait") {
        auto it = pending.find(intAttr(in, "event"));
        if (it != pending.end()) {
          expose(it->second);
          pending.erase(it);
        }
        continue;
      }
      double flops = 0;
      double d = kernelTime(in, flops);
      KernelCost &k = t.kernels[in.kernel + (in.recomputed ? " (recomputed)" : "")];
      k.seconds += d;
      k.calls += 1;
      now += d;
      (in.recomputed ? t.recompute : t.compute) += d;
      t.hardwareFlops += flops;
      if (!in.recomputed)
        t.modelFlops += flops;
    }
    if (!program.instrs.empty())
      t.ends.push_back(now);
    for (const auto &[event, p] : pending)
      expose(p);
    t.total = now;
    return t;
  }

  /// What replaying each recomputed layer's whole forward pass (`recompute.replay = layer`, as
  /// Megatron-LM's CheckpointFunction does) adds to `backward` over the plan's recomputation,
  /// which runs again only what the backward pass reads. The plan's recomputed kernels of a
  /// layer copy a prefix of the layer's forward kernels; the forward kernels from the end of
  /// one layer's prefix to the start of the next layer's are what the replay adds (for GPT: the
  /// second MLP product, its tp all-reduce and the residual add). They are found in `forward`
  /// (the stage's forward program, or `backward` itself without a pipeline, before its first
  /// recomputed kernel) by the signatures of the first recomputed run; with fewer than two
  /// layers there, or not one recomputed run per layer found, where a layer ends is unknown and
  /// nothing is added. The added kernels count as recomputation, their collectives as exposed
  /// communication.
  ProgramTime replayOf(const pf::Program &forward, const pf::Program &backward, uint32_t rank) {
    ProgramTime t;
    if (!c_.replayWholeLayer || !fullRecompute_)
      return t;
    // The recomputed runs of `backward`: the first one's signatures, and how many there are.
    std::vector<std::string> prefix;
    size_t runs = 0;
    bool inRun = false;
    for (const pf::Instr &in : backward.instrs) {
      if (in.recomputed && !inRun)
        ++runs;
      if (in.recomputed && runs == 1)
        prefix.push_back(signatureOf(in));
      inRun = in.recomputed;
    }
    if (prefix.empty())
      return t;
    // The forward kernels, and where each layer's recomputed prefix starts among them.
    std::vector<const pf::Instr *> fwd;
    for (const pf::Instr &in : forward.instrs) {
      if (in.recomputed)
        break;
      fwd.push_back(&in);
    }
    std::vector<size_t> starts;
    for (size_t i = 0; i + prefix.size() <= fwd.size();) {
      size_t n = 0;
      while (n < prefix.size() && signatureOf(*fwd[i + n]) == prefix[n])
        ++n;
      if (n == prefix.size()) {
        starts.push_back(i);
        i += n;
      } else {
        ++i;
      }
    }
    // One recomputed run per layer, each layer's prefix found once: else the runs are not
    // whole layers' prefixes (recomputation broken up by kept values), and where a layer's
    // tail starts is unknown.
    if (starts.size() < 2 || starts.size() != runs)
      return t;
    // One layer's tail, between its prefix and the next layer's; every recomputed run adds it.
    size_t begin = starts[0] + prefix.size(), end = starts[1];
    for (size_t i = begin; i < end; ++i) {
      const pf::Instr &in = *fwd[i];
      std::string name = in.kernel + " (replayed)";
      double d = 0, flops = 0;
      if (isCollective(in.kernel)) {
        d = collectiveTime(in, rank);
        t.exposed[stringAttr(in, "group")] += d * static_cast<double>(runs);
      } else {
        d = kernelTime(in, flops);
        t.recompute += d * static_cast<double>(runs);
        t.hardwareFlops += flops * static_cast<double>(runs);
      }
      if (d == 0)
        continue;
      t.kernels[name].seconds += d * static_cast<double>(runs);
      t.kernels[name].calls += static_cast<double>(runs);
      t.total += d * static_cast<double>(runs);
    }
    return t;
  }

  /// The pipeline runtime's copies around one run of a stage's program (cost::stash): its
  /// inputs that are not host data from the stash, its outputs that are not host data into it.
  double stashTime(const std::string &name, uint32_t stage) const {
    double inputs = 0, outputs = 0;
    for (const pf::Program &p : plan_.programs) {
      if (p.name != name || p.stage != stage)
        continue;
      auto elements = [](const pf::Port &port) {
        double n = 1;
        for (int64_t d : port.shape)
          n *= static_cast<double>(d);
        return n;
      };
      for (const pf::Port &in : p.inputs)
        if (!pipeline::isHostInput(in.name))
          inputs += elements(in);
      for (const pf::Port &out : p.outputs)
        if (!pipeline::isHostOutput(out.name))
          outputs += elements(out);
    }
    return cost::stash(c_, inputs, outputs);
  }

  const pf::Program *programOf(const std::string &name, uint32_t stage) const {
    for (const pf::Program &p : plan_.programs)
      if (p.name == name && p.stage == stage)
        return &p;
    return nullptr;
  }

  /// The time of program `name` of `stage` on `rank`, with what a whole-layer replay adds to
  /// its recomputation (`forward`: the program holding the layers' forward kernels, the same
  /// program when empty).
  ProgramTime timeOf(const std::string &name, uint32_t stage, uint32_t rank,
                     const std::string &forward = "") {
    const pf::Program *p = programOf(name, stage);
    if (!p)
      return {};
    ProgramTime t = time(*p, rank);
    const pf::Program *f = forward.empty() ? p : programOf(forward, stage);
    if (f)
      t.add(replayOf(*f, *p, rank), 1);
    return t;
  }

private:
  const pf::Plan &plan_;
  const cl::Cluster &c_;
  double elementBytes_ = 4;
  bool fullRecompute_ = false;

  /// Whether the instance of a group holding a rank spans nodes, and how many of its ranks
  /// share that rank's node.
  struct Route {
    bool crosses = false;
    double perNode = 1;
  };
  Route routeOf(const std::string &name, uint32_t rank) {
    auto key = std::make_pair(name, rank);
    if (auto it = routes_.find(key); it != routes_.end())
      return it->second;
    Route r;
    if (auto g = plan_.findGroup(name, rank)) {
      double local = 0;
      for (uint32_t other : g->ranks) {
        bool same = other / c_.perNode == rank / c_.perNode;
        r.crosses |= !same;
        local += same;
      }
      r.perNode = std::max(1.0, local);
    }
    return routes_[key] = r;
  }
  std::map<std::pair<std::string, uint32_t>, Route> routes_;
};

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

namespace {

std::string seconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

} // namespace

std::string tessel::formatPrediction(const StepPrediction &p, double worldSize) {
  std::ostringstream os;
  char line[200];
  os << "\npredicted step on " << p.cluster << ":\n";
  std::snprintf(line, sizeof line,
                "  step %s, %.0f tokens/s, MFU %.1f%%, HFU %.1f%%, %.1f TFLOP/s per accelerator "
                "(%g ranks)\n",
                seconds(p.step).c_str(), p.tokensPerSecond, 100 * p.mfu, 100 * p.hfu,
                p.flopsPerRank / 1e12, worldSize);
  os << line;
  const StepBreakdown &b = p.breakdown;
  auto row = [&](const std::string &what, double t) {
    std::snprintf(line, sizeof line, "  %-24s %12s %6.1f%%\n", what.c_str(), seconds(t).c_str(),
                  p.step > 0 ? 100 * t / p.step : 0.0);
    os << line;
  };
  os << "  breakdown of the slowest rank's step:\n";
  row("compute", b.compute);
  row("recompute", b.recompute);
  for (const auto &[g, t] : b.exposed)
    row("exposed comm " + g, t);
  if (p.pipelined)
    row("pipeline bubble", b.bubble);
  row("optimizer", b.optimizer);
  std::snprintf(line, sizeof line, "  (communication hidden behind compute: %s)\n",
                seconds(b.hidden).c_str());
  os << line;
  return os.str();
}

void tessel::predictionJson(llvm::json::OStream &j, const StepPrediction &p) {
  const StepBreakdown &b = p.breakdown;
  j.object([&] {
    j.attribute("cluster", p.cluster);
    j.attribute("step", p.step);
    j.attribute("tokens", p.tokens);
    j.attribute("tokens_per_second", p.tokensPerSecond);
    j.attribute("model_flops", p.modelFlops);
    j.attribute("hardware_flops", p.hardwareFlops);
    j.attribute("mfu", p.mfu);
    j.attribute("hfu", p.hfu);
    j.attribute("flops_per_rank", p.flopsPerRank);
    j.attributeObject("breakdown", [&] {
      j.attribute("compute", b.compute);
      j.attribute("recompute", b.recompute);
      j.attribute("bubble", b.bubble);
      j.attribute("optimizer", b.optimizer);
      j.attribute("hidden", b.hidden);
      j.attributeObject("exposed", [&] {
        for (const auto &[group, seconds] : b.exposed)
          j.attribute(group, seconds);
      });
    });
    j.attribute("kernels_rank", static_cast<int64_t>(p.kernelsRank));
    j.attributeObject("kernels", [&] {
      for (const auto &[name, k] : p.kernels)
        j.attributeObject(name, [&] {
          j.attribute("seconds", k.seconds);
          j.attribute("calls", k.calls);
        });
    });
  });
}
