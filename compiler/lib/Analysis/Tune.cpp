//===- Tune.cpp - Searching parallel layouts for the fastest step ---------===//
//
// Each layout is costed from the model's shape (TuneLayout.cpp reads it) by the published
// formulas for activations and model states and the cost model's kernel and link times, its
// pipeline timed by simulating its schedule; the search enumerates the layouts of a GPU count
// and keeps those that fit. TuneReport.cpp prints what it finds.
//
//===----------------------------------------------------------------------===//

#include "tessel/Analysis/Tune.h"

#include "tessel/Analysis/CostModel.h"

#include "common/schedule/Schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

using namespace tessel;
namespace pf = tessel::planfile;
namespace cl = tessel::cluster;

namespace {

/// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
/// Table 2: activation bytes per layer for micro-batch b, sequence s, hidden h, a heads and tp
/// t (16-bit activations, 1-byte dropout masks). Context parallelism gives each rank s / cp of
/// the queries against all s keys, so s becomes s / cp except in the scores' a·s·s.
double activationsPerLayer(const TransformerShape &m, const Layout &l, bool withScores = true) {
  double s = m.seq / l.cp, b = l.microBatch, h = m.hidden, a = m.heads, t = l.tp;
  double sbh = s * b * h;
  double scores = withScores ? 5 * a * s * m.seq * b : 0; // 5as²b with s² = (s/cp)·s
  if (l.recompute == "full")
    return 2 * sbh;
  if (l.recompute == "selective")
    return l.sp ? 34 * sbh / t : sbh * (10 + 24 / t);
  if (t == 1)
    return 34 * sbh + scores;
  return l.sp ? (34 * sbh + scores) / t : sbh * (10 + 24 / t) + scores / t;
}

/// ZeRO (Rajbhandari et al. 2020, §5): model states per rank for `params` elements held by the
/// rank's stage and tp share: 16-bit parameters and gradients (2 + 2 bytes) and K = 12 bytes of
/// fp32 optimizer state, each split over dp from its stage on; fp32 training has 4 + 4 and 8.
double modelStates(double params, double elementBytes, int zero, double dp) {
  double p = elementBytes, g = elementBytes, o = elementBytes == 2 ? 12 : 8;
  switch (zero) {
  case 0:
    return (p + g + o) * params;
  case 1:
    return (p + g) * params + o * params / dp;
  case 2:
    return p * params + (g + o) * params / dp;
  default:
    return (p + g + o) * params / dp;
  }
}

struct PassCost {
  double time = 0, flops = 0;
  std::map<std::string, double> comm; // exposed, by axis
  void add(double t, double f = 0) {
    time += t;
    flops += f;
  }
  void addComm(const std::string &axis, double t) {
    time += t;
    comm[axis] += t;
  }
};

/// The schedules' action lists and their in-flight peaks, built once per (kind, p, m, v).
struct ScheduleCache {
  struct Entry {
    std::vector<std::vector<pipeline::Action>> lists;
    int peakInFlight = 0;
  };
  std::map<std::tuple<int, int, int, int>, Entry> entries;
  const Entry *get(pipeline::ScheduleKind kind, int p, int m, int v) {
    auto key = std::make_tuple(static_cast<int>(kind), p, m, v);
    auto it = entries.find(key);
    if (it != entries.end())
      return it->second.lists.empty() ? nullptr : &it->second;
    Entry e;
    std::string error;
    e.lists = pipeline::buildSchedule(kind, p, m, v, error);
    if (!error.empty())
      e.lists.clear();
    else
      e.peakInFlight = pipeline::simulate(kind, p, m, v, e.lists).peakInFlight.at(0);
    auto &slot = entries[key] = std::move(e);
    return slot.lists.empty() ? nullptr : &slot;
  }
};

ScheduleCache &scheduleCache() {
  static ScheduleCache cache;
  return cache;
}

} // namespace

LayoutCost tessel::evaluateLayout(const TransformerShape &m, const Layout &l, const cl::Cluster &c,
                                  std::string &why, bool timeAll) {
  LayoutCost out;
  double t = l.tp, eb = m.elementBytes;
  int64_t micro = l.microbatches(m);
  // The sizes must divide as the passes need them to.
  if (static_cast<int64_t>(m.heads) % l.tp || static_cast<int64_t>(m.ffn) % l.tp ||
      static_cast<int64_t>(m.vocab) % l.tp)
    why = "tp must divide heads, ffn and vocab";
  else if (static_cast<int64_t>(m.layers) % (l.pp * l.virtualStages))
    why = "pp × virtual must divide the layers";
  else if (static_cast<int64_t>(m.seq) % (l.cp * (l.sp ? l.tp : 1)))
    why = "cp (× tp under sequence parallelism) must divide seq";
  else if (micro < 1 || static_cast<int64_t>(m.batch) % (static_cast<int64_t>(l.dp) * l.microBatch))
    why = "dp × micro-batch must divide the batch";
  else if (l.sp && l.tp == 1)
    why = "sequence parallelism needs tp > 1";
  if (!why.empty())
    return out;

  // Links: the mesh is (dp, pp, cp, tp), tp varying fastest, and a node holds perNode
  // consecutive ranks; a group stays inside a node when its span of ranks does. A group of
  // `size` ranks `stride` apart that crosses nodes has perNode / stride of them on a node (at
  // least one): its ring collectives get their ports (cost::crossing); a send, one port.
  double perNode = static_cast<double>(c.perNode);
  auto ring = [&](double size, double stride) {
    if (size * stride <= perNode)
      return c.intra;
    return cost::crossing(c, std::min(size, std::max(1.0, perNode / stride)));
  };
  const cl::Link tpLink = ring(t, 1);
  const cl::Link cpLink = ring(l.cp, t);
  const cl::Link &ppLink = l.pp * l.cp * t <= perNode ? c.intra : c.inter;
  const cl::Link dpLink = ring(l.dp, l.pp * l.cp * t);

  // One layer, one micro-batch, on one rank: T tokens of this rank's sequence share.
  double T = l.microBatch * m.seq / l.cp, h = m.hidden;
  double qkv = (m.heads + 2 * m.kvHeads) * m.head / t, attnOut = m.heads * m.head / t;
  double ffn = m.ffn / t;
  auto gemm = [&](PassCost &pc, double rows, double n, double k, double times) {
    pc.add(times * cost::gemm(c, rows, n, k, 1, eb), times * cost::gemmFlops(rows, n, k, 1));
  };
  double attnFwdFlops =
      cost::attentionFlops(l.microBatch, m.seq / l.cp, m.heads / t, m.seq / 2, m.head, false);
  double attnBwdFlops = 2.5 * attnFwdFlops;
  // The attention of one pass, fused or (on a cluster that says so) as separate kernels.
  auto attention = [&](PassCost &pc, bool backward) {
    if (!c.unfusedAttention) {
      double flops = backward ? attnBwdFlops : attnFwdFlops;
      pc.add(cost::attention(c, flops, m.seq, eb), flops);
      return;
    }
    double flops = 0;
    double time = cost::unfusedAttention(c, l.microBatch, m.seq / l.cp, m.heads / t, m.seq, m.head,
                                         backward, eb, flops);
    pc.add(time, flops);
  };
  // Memory-bound traffic in elements: two norms and two residual adds on the hidden size (split
  // over tp under sequence parallelism), the activation function on the ffn size.
  double hiddenShare = l.sp ? T * h / t : T * h;
  double elementwise = (2 * 2 + 2 * 3) * hiddenShare + (m.mlpMatrices == 3 ? 3 : 2) * T * ffn;
  // Tensor-parallel collectives of one layer pass: two all-reduces (or, under sequence
  // parallelism, two all-gathers and two reduce-scatters of the same bytes) of T × h.
  double tpPass = l.tp > 1 ? (l.sp ? 2 * 2 * cost::gather(c, tpLink, t, T * h * eb)
                                   : 2 * cost::allReduce(c, tpLink, t, T * h * eb))
                           : 0;
  // Context parallelism gathers every rank's keys and values forward, reduce-scatters their
  // gradients backward.
  double cpPass = l.cp > 1 ? cost::gather(c, cpLink, l.cp,
                                          2 * l.microBatch * m.seq * m.kvHeads / t * m.head * eb)
                           : 0;

  PassCost fwd, bwd, rec;
  // One layer's forward pass; without its tail (the MLP's last product and the tp collective
  // after it) when `tail` is false: what the plan's full recomputation leaves out, since only
  // the next layer reads their result (a cluster with `recompute.replay = layer` runs them too).
  auto forwardPass = [&](PassCost &pc, bool tail) {
    gemm(pc, T, qkv, h, 1);
    gemm(pc, T, h, attnOut, 1);
    gemm(pc, T, ffn, h, m.mlpMatrices - 1);
    if (tail)
      gemm(pc, T, h, ffn, 1);
    attention(pc, false);
    pc.add(cost::memoryBound(c, elementwise * eb));
    // Two all-reduces, or two all-gathers and two reduce-scatters; the tail holds one
    // all-reduce, or one reduce-scatter.
    if (tpPass > 0)
      pc.addComm("tp", tail ? tpPass : tpPass * (l.sp ? 0.75 : 0.5));
    if (cpPass > 0)
      pc.addComm("cp", cpPass);
  };
  forwardPass(fwd, true);
  // Backward: each GEMM twice (input and weight gradients), attention 2.5 times its forward,
  // twice the elementwise traffic, the tp collectives mirrored; under sequence parallelism
  // also the two inputs of the column-parallel products gathered again for their weight
  // gradients, since only their shards are kept (the activations below count them so).
  gemm(bwd, T, qkv, h, 2);
  gemm(bwd, T, h, attnOut, 2);
  gemm(bwd, T, ffn, h, 2 * (m.mlpMatrices - 1));
  gemm(bwd, T, h, ffn, 2);
  attention(bwd, true);
  bwd.add(cost::memoryBound(c, 2 * elementwise * eb));
  if (tpPass > 0)
    bwd.addComm("tp", l.sp ? 1.5 * tpPass : tpPass);
  if (cpPass > 0)
    bwd.addComm("cp", cpPass);
  if (l.recompute == "full")
    forwardPass(rec, c.replayWholeLayer);
  else if (l.recompute == "selective")
    attention(rec, false);

  // The first chunk adds the embedding lookup, the last the head GEMM (vocab split over tp)
  // and the loss over the logits.
  PassCost headFwd, headBwd;
  headFwd.add(cost::gemm(c, T, m.vocab / t, h, 1, eb), cost::gemmFlops(T, m.vocab / t, h, 1));
  headFwd.add(cost::memoryBound(c, 3 * T * m.vocab / t * 4));
  headBwd.add(2 * cost::gemm(c, T, m.vocab / t, h, 1, eb),
              2 * cost::gemmFlops(T, m.vocab / t, h, 1));
  double embed = cost::memoryBound(c, 2 * T * h * eb);

  int chunks = l.pp * l.virtualStages;
  double layersPerChunk = m.layers / chunks;
  std::vector<pipeline::Costs> costs(static_cast<size_t>(chunks));
  double transfer = l.pp > 1 ? cost::send(c, ppLink, hiddenShare * eb) : 0;
  // The pipeline runtime's stash (`stash.bandwidth`), as the estimate times it from the plan's
  // ports: a chunk's forward program takes its input and gives its output and the values its
  // backward program keeps; the backward program takes those and the output's gradient and
  // gives the input's (cost::stash counts the copies). What a layer keeps follows the
  // recomputation pass: under full recomputation its input; under selective, also the outputs of
  // its products and attention (q, k, v, attention's output, the output projection's, the MLP's
  // first products); without, the activations of the memory model below without the scores
  // fused attention does not keep, at 2 bytes an element. The last chunk also keeps the final
  // norm's input, the head's input (all of h, gathered under sequence parallelism) and the
  // logits (T × vocab/t).
  double keptPerLayer = hiddenShare;
  if (l.recompute == "selective")
    keptPerLayer += T * (qkv + attnOut + h + (m.mlpMatrices - 1) * ffn);
  else if (l.recompute == "none")
    keptPerLayer = activationsPerLayer(m, l, false) / 2;
  double kept = layersPerChunk * keptPerLayer;
  double keptHead = hiddenShare + T * h + T * m.vocab / t; // the head reads the whole h
  auto stash = [&](double in, double out) { return cost::stash(c, in, out); };
  for (int k = 0; k < chunks; ++k) {
    pipeline::Costs &x = costs[static_cast<size_t>(k)];
    double input = k > 0 ? hiddenShare : 0, output = k + 1 < chunks ? hiddenShare : 0;
    double keeps = kept + (k + 1 == chunks ? keptHead : 0);
    bool staged = l.pp > 1; // without a pipeline one program holds both passes
    x.forward = layersPerChunk * fwd.time + (k == 0 ? embed : 0) +
                (k == chunks - 1 ? headFwd.time : 0) + (staged ? stash(input, output + keeps) : 0);
    x.backward = layersPerChunk * (bwd.time + rec.time) + (k == 0 ? embed : 0) +
                 (k == chunks - 1 ? headBwd.time : 0) + (staged ? stash(keeps + output, input) : 0);
    x.backwardInput = x.backwardWeight = x.backward / 2;
    x.transfer = transfer;
  }

  // Model states of the first stage's ranks (the embedding's stage) and their activations.
  double perLayerParams = (m.parameters - m.vocab * m.hidden) / m.layers;
  double stageParams = (perLayerParams * m.layers / l.pp + m.vocab * m.hidden) / t;
  if (l.pp == 1)
    stageParams = m.parameters / t;
  out.modelStates = modelStates(stageParams, eb, l.zero, l.dp);
  out.activationsPerLayer = activationsPerLayer(m, l) * (eb == 4 ? 2 : 1);

  double pipelineTime = 0;
  double layersInFlight = m.layers;
  const ScheduleCache::Entry *entry = nullptr;
  pipeline::ScheduleKind kind = l.schedule;
  if (l.pp > 1) {
    entry = scheduleCache().get(kind, l.pp, static_cast<int>(micro), l.virtualStages);
    if (!entry) {
      why = std::string(pipeline::scheduleKindName(kind)) + " cannot run " + std::to_string(micro) + " micro-batches over " +
            std::to_string(l.pp) + " stages" +
            (l.virtualStages > 1 ? " × " + std::to_string(l.virtualStages) + " virtual" : "");
      return out;
    }
    layersInFlight = entry->peakInFlight * layersPerChunk;
  } else if (l.virtualStages != 1) {
    why = "virtual stages need a pipeline";
    return out;
  }
  out.activations = out.activationsPerLayer * layersInFlight;
  out.memory = out.modelStates + out.activations;
  out.fits = out.memory <= c.memory;
  // A search has no use for the time of a layout that does not fit.
  if (!out.fits && !timeAll)
    return out;
  if (entry)
    pipelineTime = pipeline::simulateMakespan(l.pp, static_cast<int>(micro), l.virtualStages,
                                              entry->lists, costs);
  else
    pipelineTime = static_cast<double>(micro) * (costs[0].forward + costs[0].backward);

  // Data-parallel gradient reduction of the rank's parameters, bucketed beside the backward
  // pass of the last micro-batch: only what that backward does not cover is exposed. ZeRO 1
  // and 2 reduce-scatter the gradients and all-gather the updated parameters (the bytes of one
  // all-reduce); ZeRO 3 also gathers the parameters for each micro-batch's forward and backward.
  double dpTime = 0, zero3 = 0;
  double gradBytes = stageParams * eb;
  if (l.dp > 1) {
    dpTime = l.zero == 0 ? cost::allReduce(c, dpLink, l.dp, gradBytes)
                         : 2 * cost::gather(c, dpLink, l.dp, gradBytes);
    if (l.zero == 3)
      zero3 = 2 * static_cast<double>(micro) * cost::gather(c, dpLink, l.dp, gradBytes);
  }
  double lastBackward = 0;
  for (int k = 0; k < chunks; k += l.pp)
    lastBackward += costs[static_cast<size_t>(k)].backward;
  // As the plan lowering does it: without a pipeline, ZeRO 0, 2 and 3 reduce every
  // micro-batch's gradients, ZeRO 1 accumulates them and reduces once.
  double reductions = l.pp == 1 && l.zero != 1 ? static_cast<double>(micro) : 1.0;
  double dpExposed = reductions * std::max(0.0, dpTime - lastBackward) + zero3;
  double optimizerElements = stageParams / (l.zero >= 1 ? l.dp : 1);
  double optimizer = cost::memoryBound(c, optimizerElements * 28);

  out.step = pipelineTime + dpExposed + optimizer;
  StepBreakdown &b = out.breakdown;
  double mb = static_cast<double>(micro), share = layersPerChunk * l.virtualStages;
  // The first stage's chunks: their layers, and beyond them the embedding and stash copies.
  double extras = 0;
  for (int k = 0; k < chunks; k += l.pp)
    extras += costs[static_cast<size_t>(k)].forward + costs[static_cast<size_t>(k)].backward -
              layersPerChunk * (fwd.time + bwd.time + rec.time);
  b.compute = mb * (share * (fwd.time + bwd.time - fwd.comm["tp"] - bwd.comm["tp"] -
                             fwd.comm["cp"] - bwd.comm["cp"]) +
                    extras);
  b.recompute = mb * share * (rec.time - rec.comm["tp"] - rec.comm["cp"]);
  for (const char *axis : {"tp", "cp"}) {
    double x = mb * share * (fwd.comm[axis] + bwd.comm[axis] + rec.comm[axis]);
    if (x > 0)
      b.exposed[axis] = x;
  }
  if (l.pp > 1)
    b.exposed["pp"] = 2 * mb * l.virtualStages * transfer;
  if (dpExposed > 0)
    b.exposed["dp"] = dpExposed;
  b.hidden = reductions * (dpTime - std::max(0.0, dpTime - lastBackward));
  b.optimizer = optimizer;
  double busy = b.compute + b.recompute + optimizer;
  for (const auto &[axis, x] : b.exposed)
    busy += x;
  b.bubble = std::max(0.0, out.step - busy);
  out.bubble = out.step > 0 ? b.bubble / out.step : 0;

  // FLOPs over every rank: each rank's share of each micro-batch's layers and head.
  double ranks = static_cast<double>(l.dp) * l.tp * l.pp * l.cp;
  double perMicro = m.layers * (fwd.flops + bwd.flops) + headFwd.flops + headBwd.flops;
  double model = perMicro * mb * ranks / l.pp;
  double hardware = model + m.layers * rec.flops * mb * ranks / l.pp;
  double peak = c.peak(eb);
  out.mfu = model / (ranks * peak * out.step);
  out.hfu = hardware / (ranks * peak * out.step);
  out.tokensPerSecond = m.batch * m.seq / out.step;
  return out;
}

std::vector<Candidate> tessel::searchLayouts(const TransformerShape &s, const cl::Cluster &c,
                                             int gpus, size_t &overMemory) {
  std::vector<Candidate> found;
  overMemory = 0;
  for (int tp = 1; tp <= std::min<int64_t>(c.perNode, 8) && tp <= gpus; tp *= 2)
    for (int cp = 1; cp <= 4 && tp * cp <= gpus; cp *= 2)
      for (int pp = 1; pp <= 64 && tp * cp * pp <= gpus; ++pp) {
        if (gpus % (tp * cp * pp) || static_cast<int64_t>(s.layers) % pp)
          continue;
        int dp = gpus / (tp * cp * pp);
        // Interleaving may split a stage's layers into any equal number of chunks, down to one
        // layer per chunk (Megatron-Core's limit too); without a pipeline there is one chunk.
        int perStage = pp > 1 ? static_cast<int>(static_cast<int64_t>(s.layers) / pp) : 1;
        for (int mb : {1, 2, 4, 8})
          // All-forward-all-backward holds every micro-batch at once: 1F1B runs the same
          // work in less memory, so the search leaves it out.
          for (pipeline::ScheduleKind schedule : pipeline::kScheduleKinds)
            for (int v = 1; v <= perStage; ++v) {
              if (perStage % v || schedule == pipeline::ScheduleKind::AFAB)
                continue;
              if (pp == 1 && schedule != pipeline::ScheduleKind::OneFOneB)
                continue;
              if (pp > 1 && (schedule == pipeline::ScheduleKind::Interleaved) != (v > 1))
                continue;
              for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp)
                for (int zero = 0; zero <= (dp == 1 ? 0 : pp > 1 ? 1 : 3); ++zero)
                  for (const char *rc : {"none", "selective", "full"}) {
                    Layout l;
                    l.dp = dp, l.tp = tp, l.pp = pp, l.cp = cp, l.virtualStages = v;
                    l.sp = sp, l.zero = zero, l.microBatch = mb, l.schedule = schedule;
                    l.recompute = rc;
                    std::string why;
                    LayoutCost cost = evaluateLayout(s, l, c, why, false);
                    if (!why.empty())
                      continue;
                    if (cost.fits)
                      found.push_back({l, cost});
                    else
                      ++overMemory;
                  }
            }
      }
  std::stable_sort(found.begin(), found.end(), [](const Candidate &a, const Candidate &b) {
    return a.cost.step < b.cost.step;
  });
  return found;
}
