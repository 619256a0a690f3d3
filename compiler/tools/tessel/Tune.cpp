//===- Tune.cpp - tessel tune ---------------------------------------------===//
//
// `tessel tune FILE.model --cluster C --gpus N` searches the parallel layouts of N accelerators
// of a cluster for the fastest training step that fits in their memory, and prints the best
// (or predicts the one --layout gives), as text or JSON, with an SVG of every candidate
// (--svg) and the best as a `parallel` section to put in the spec (--write).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"

#include "tessel/Analysis/Tune.h"
#include "tessel/Analysis/Estimate.h"
#include "tessel/Analysis/StepTime.h"

#include "llvm/Support/JSON.h"

using namespace llvm;

namespace tessel::driver {

int runTune(const char *argv0) {
  if (!prepareOutputPath(tuneWrite) || !prepareOutputPath(tuneSvg))
    return 2;
  if (tuneGpus < 1) {
    errs() << "tessel: error: --gpus must be positive\n";
    return 2;
  }
  cluster::Cluster cluster;
  if (!loadCluster(argv0, tuneCluster, cluster))
    return 1;
  Layout only;
  std::string error;
  if (!tuneLayout.empty() && !parseLayout(tuneLayout, only, error)) {
    errs() << "tessel: error: --layout: " << error << "\n";
    return 2;
  }
  planfile::Plan plan;
  if (int rc = compileToPlan(argv0, plan))
    return rc;
  TransformerShape shape;
  if (!readTransformerShape(plan, estimatePlan(plan).parameterCount, shape, error)) {
    errs() << "tessel: error: " << inputFile << ": " << error << "\n";
    return 1;
  }
  std::vector<Candidate> candidates;
  size_t overMemory = 0;
  if (!tuneLayout.empty()) {
    if (only.dp * only.tp * only.pp * only.cp != tuneGpus) {
      errs() << "tessel: error: --layout " << only.describe() << " has "
             << only.dp * only.tp * only.pp * only.cp << " ranks, not --gpus " << tuneGpus << "\n";
      return 2;
    }
    LayoutCost cost = evaluateLayout(shape, only, cluster, error);
    if (!error.empty()) {
      errs() << "tessel: error: --layout " << only.describe() << ": " << error << "\n";
      return 1;
    }
    candidates.push_back({only, cost});
  } else {
    candidates = searchLayouts(shape, cluster, tuneGpus, overMemory);
  }
  if (candidates.empty()) {
    errs() << "tessel: error: no layout of " << tuneGpus << " accelerators can run " << shape.model
           << (overMemory ? " within their memory" : "") << "\n";
    return 1;
  }
  if (tuneJson) {
    llvm::json::OStream j(outs(), 2);
    candidatesJson(j, candidates, tuneTop);
    outs() << "\n";
  } else {
    outs() << formatCandidates(candidates, tuneTop, overMemory, shape, cluster);
  }
  if (!tuneJson) {
    const Candidate &best = candidates.front();
    StepPrediction p;
    p.cluster = cluster.name;
    p.step = best.cost.step;
    p.tokensPerSecond = best.cost.tokensPerSecond;
    p.mfu = best.cost.mfu;
    p.hfu = best.cost.hfu;
    p.flopsPerRank = best.cost.hfu * cluster.peak(shape.elementBytes);
    p.breakdown = best.cost.breakdown;
    p.pipelined = best.layout.pp > 1;
    outs() << "\nbest: " << best.layout.describe() << "\n" << formatPrediction(p, tuneGpus);
  }
  if (!tuneSvg.empty()) {
    std::string svg =
        candidatesSvg(candidates,
                      shape.model + " on " + std::to_string(tuneGpus) + " x " + cluster.name +
                          ": " + std::to_string(candidates.size()) + " layouts that fit",
                      cluster.memory);
    if (!writeOutput(tuneSvg, std::vector<uint8_t>(svg.begin(), svg.end()), false))
      return 2;
  }
  if (!tuneWrite.empty()) {
    std::string text = parallelSection(candidates.front().layout, shape);
    if (!writeOutput(tuneWrite, std::vector<uint8_t>(text.begin(), text.end()), false))
      return 2;
  }
  return 0;
}

} // namespace tessel::driver
