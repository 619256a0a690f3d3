//===- ProgramTime.cpp - Timing kernels, collectives and programs ---------===//
//
// What one rank of a plan spends on the programs it runs, read from the plan's instructions
// rather than from a formula of the model: each kernel call by its roofline on the cluster,
// each collective by the α–β cost of the link its group crosses, and a program as a compute
// stream beside a communication stream, so that a collective started with an event is exposed
// only where the compute before its `wait` does not hide it.
//
//===----------------------------------------------------------------------===//

#include "ProgramTime.h"

#include "tessel/Analysis/CostModel.h"

#include "common/layout/PipelineLayout.h"

#include <algorithm>
#include <sstream>

namespace tessel::steptime {
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

} // namespace

Model::Model(const pf::Plan &plan, const cl::Cluster &c) : plan_(plan), c_(c) {
  std::string precision = "fp32";
  if (const pf::Attr *p = plan.findConfig("train.precision"))
    if (auto s = std::get_if<std::string>(&p->value))
      precision = *s;
  elementBytes_ = precision == "fp32" ? 4 : 2;
  if (const pf::Attr *r = plan.findConfig("parallel.recompute"))
    if (auto s = std::get_if<std::string>(&r->value))
      fullRecompute_ = *s == "full";
}

const cl::Link &Model::linkOf(const std::string &name, uint32_t rank) {
  return routeOf(name, rank).crosses ? c_.inter : c_.intra;
}

cl::Link Model::collectiveLink(const std::string &name, uint32_t rank) {
  Route r = routeOf(name, rank);
  return r.crosses ? cost::crossing(c_, r.perNode) : c_.intra;
}

double Model::groupSize(const pf::Instr &in, const std::string &group) const {
  if (const pf::Attr *members = in.find("members"))
    if (auto list = std::get_if<std::vector<int64_t>>(&members->value))
      return static_cast<double>(list->size());
  const pf::Group *g = plan_.groupNamed(group);
  return g ? static_cast<double>(plan_.groupSize(*g)) : 1.0;
}

double Model::collectiveTime(const pf::Instr &in, uint32_t rank) {
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

double Model::kernelTime(const pf::Instr &in, double &flops) {
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
      return cost::attentionFlops(static_cast<double>(intAttr(in, "batch")),
                                  static_cast<double>(intAttr(in, "seq")),
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
      double elements = static_cast<double>(r.bytes) / static_cast<double>(pf::dtypeBytes(r.dtype));
      bytes += elements * (pf::isFloat(r.dtype) ? elementBytes_ : 4.0);
    }
  };
  add(in.inputs);
  add(in.outputs);
  return cost::memoryBound(c_, bytes);
}

ProgramTime Model::time(const pf::Program &program, uint32_t rank) {
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

ProgramTime Model::replayOf(const pf::Program &forward, const pf::Program &backward,
                            uint32_t rank) {
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

double Model::stashTime(const std::string &name, uint32_t stage) const {
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

const pf::Program *Model::programOf(const std::string &name, uint32_t stage) const {
  for (const pf::Program &p : plan_.programs)
    if (p.name == name && p.stage == stage)
      return &p;
  return nullptr;
}

ProgramTime Model::timeOf(const std::string &name, uint32_t stage, uint32_t rank,
                          const std::string &forward) {
  const pf::Program *p = programOf(name, stage);
  if (!p)
    return {};
  ProgramTime t = time(*p, rank);
  const pf::Program *f = forward.empty() ? p : programOf(forward, stage);
  if (f)
    t.add(replayOf(*f, *p, rank), 1);
  return t;
}

Model::Route Model::routeOf(const std::string &name, uint32_t rank) {
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

} // namespace tessel::steptime
