//===- Tune.h - Searching parallel layouts for the fastest step ----*- C++ -*-===//
//
// `tessel tune X.model --cluster C --gpus N` tries every layout of N accelerators — data,
// tensor, pipeline and context parallelism, sequence parallelism, the ZeRO stage, the
// micro-batch size, the pipeline schedule and its virtual stages, recomputation — and ranks
// those that fit the accelerator's memory by predicted step time. Compiling each candidate
// would take seconds, so the tuner works from the model's dims (a transformer layer's GEMMs,
// attention, memory-bound kernels and collectives, docs/planning.md) with the same cost
// primitives (CostModel.h) and the same pipeline simulation as `tessel estimate --cluster`;
// memory follows the ZeRO paper's model states and Korthikanti et al.'s activations per layer.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_ANALYSIS_TUNE_H
#define TESSEL_ANALYSIS_TUNE_H

#include "common/cluster/Cluster.h"
#include "common/plan/PlanFile.h"
#include "common/schedule/ScheduleKind.h"
#include "tessel/Analysis/StepTime.h"

#include <string>
#include <vector>

namespace llvm::json {
class OStream;
} // namespace llvm::json

namespace tessel {

/// What the tuner needs of a transformer, read off a compiled plan's config.
struct TransformerShape {
  std::string model;
  double layers = 0, hidden = 0, heads = 0, kvHeads = 0, head = 0, ffn = 0, seq = 0, vocab = 0;
  double batch = 0;       ///< Sequences per optimizer step.
  double parameters = 0;  ///< Ψ, all parameters.
  double mlpMatrices = 2; ///< 2 for GELU MLPs, 3 for gated (SwiGLU) ones.
  double elementBytes = 2;
};

/// Reads the shape from `plan` (dims embed, heads, head, ffn, seq, vocab, optional kv_heads;
/// layers; train.batch, train.precision) and Ψ; false with the reason when a dim is missing.
bool readTransformerShape(const planfile::Plan &plan, double parameters, TransformerShape &out,
                          std::string &error);

struct Layout {
  int dp = 1, tp = 1, pp = 1, cp = 1, virtualStages = 1, zero = 0, microBatch = 1;
  bool sp = false;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB; ///< With pp > 1.
  std::string recompute = "none";
  int64_t microbatches(const TransformerShape &s) const;
  /// "dp=16 tp=8 pp=8 v=2 sp zero=1 mb=1 interleaved recompute=full".
  std::string describe() const;
};

/// Reads a layout written as describe() writes it (or with commas); false with the reason.
bool parseLayout(const std::string &text, Layout &out, std::string &error);

struct LayoutCost {
  double step = 0, tokensPerSecond = 0, mfu = 0, hfu = 0, bubble = 0;
  /// Per rank of the first pipeline stage (the fullest): model states by the ZeRO paper,
  /// activations by Korthikanti et al. per layer and micro-batch, times the layers in flight.
  double modelStates = 0, activationsPerLayer = 0, activations = 0, memory = 0;
  bool fits = false;
  StepBreakdown breakdown;
};

/// Predicts one layout; `why` is set when the layout cannot run the model (a size that does
/// not divide), in which case the cost is meaningless. Without `timeAll`, a layout over the
/// memory limit gets its memory figures only.
LayoutCost evaluateLayout(const TransformerShape &s, const Layout &l, const cluster::Cluster &c,
                          std::string &why, bool timeAll = true);

struct Candidate {
  Layout layout;
  LayoutCost cost;
};

/// Every valid layout of `gpus` accelerators that fits in memory, fastest first;
/// `overMemory` receives how many more there were.
std::vector<Candidate> searchLayouts(const TransformerShape &s, const cluster::Cluster &c, int gpus,
                                     size_t &overMemory);

/// The table `tessel tune` prints (the first `top` candidates), and a candidate as the
/// `parallel { ... }` section of a .model file.
std::string formatCandidates(const std::vector<Candidate> &candidates, size_t top,
                             size_t overMemory, const TransformerShape &s,
                             const cluster::Cluster &c);
/// The first `top` candidates as a JSON array (the value `j` writes next).
void candidatesJson(llvm::json::OStream &j, const std::vector<Candidate> &candidates,
                    size_t top);
std::string parallelSection(const Layout &l, const TransformerShape &s);
/// A chart of the candidates as an SVG: memory per rank against predicted step time, one dot
/// per layout (the best larger), the memory limit dashed.
std::string candidatesSvg(const std::vector<Candidate> &candidates, const std::string &title,
                          double memoryLimit);

} // namespace tessel

#endif // TESSEL_ANALYSIS_TUNE_H
