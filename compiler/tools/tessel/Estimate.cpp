//===- Estimate.cpp - tessel estimate -------------------------------------===//
//
// `tessel estimate FILE.model` compiles the model to a plan and prints what its layout costs each
// rank: memory by what it holds, bytes sent per step, the pipeline's bubble; with --cluster, the
// predicted step time and MFU. It also draws the predicted pipeline schedule (--svg, --trace)
// and a rank's memory over its training steps (--memory-svg, --memory-trace).
//
//===----------------------------------------------------------------------===//

#include "Commands.h"
#include "MemoryPictures.h"

#include "tessel/Analysis/Estimate.h"
#include "common/schedule/Schedule.h"
#include "common/schedule/Timeline.h"
#include "tessel/Analysis/StepTime.h"

#include "llvm/Support/JSON.h"

using namespace llvm;

namespace tessel::driver {

int runEstimate(const char *argv0) {
  if (!prepareOutputPath(estimateTrace) || !prepareOutputPath(estimateSvg) ||
      !prepareOutputPath(estimateMemorySvg) || !prepareOutputPath(estimateMemoryTrace))
    return 2;
  if (estimateMemorySteps < 1 || estimateMemorySteps > 100) {
    errs() << "tessel: error: --memory-steps must be 1 to 100, not " << estimateMemorySteps << "\n";
    return 2;
  }
  cluster::Cluster cluster;
  if (!estimateCluster.empty() && !loadCluster(argv0, estimateCluster, cluster))
    return 1;
  planfile::Plan plan;
  ParameterCounts counts;
  if (int rc = compileToPlan(argv0, plan, &counts))
    return rc;
  PlanEstimate e = estimatePlan(plan);
  if (counts.expert > 0) {
    e.activeParameterCount = counts.active;
    e.expertParameterCount = counts.expert;
    for (const ParameterCounts::Routing &r : counts.routings)
      e.routing += (e.routing.empty() ? "top " : ", top ") + std::to_string(r.k) + " of " +
                   std::to_string(r.experts) + " " + r.dim;
  }
  StepPrediction prediction;
  if (!estimateCluster.empty())
    prediction = predictStep(plan, cluster);
  if (estimateJsonOutput) {
    // One document: the estimate's members, and the prediction as one more.
    llvm::json::OStream j(outs(), 2);
    j.object([&] {
      estimateJsonMembers(j, e);
      if (!estimateCluster.empty()) {
        j.attributeBegin("prediction");
        predictionJson(j, prediction);
        j.attributeEnd();
        j.attribute("kv_cache_tokens", kvCacheTokens(e, cluster.memory));
      }
    });
    outs() << "\n";
  } else {
    outs() << formatEstimate(e);
    if (!estimateCluster.empty())
      outs() << formatPrediction(prediction, e.worldSize)
             << formatKvCacheFit(e, cluster.memory, cluster.name);
  }
  auto write = [&](const std::string &path, const std::string &text) {
    std::vector<uint8_t> bytes(text.begin(), text.end());
    return writeOutput(path, bytes, false);
  };
  if (!estimateMemorySvg.empty() || !estimateMemoryTrace.empty()) {
    MemoryPictureOptions options;
    options.svg = estimateMemorySvg;
    options.trace = estimateMemoryTrace;
    options.rank = estimateMemoryRank;
    options.steps = estimateMemorySteps;
    options.cluster = estimateCluster.empty() ? nullptr : &cluster;
    std::vector<MemoryPicture> pictures;
    std::string error;
    if (!memoryPictures(plan, options, pictures, error)) {
      errs() << "tessel: error: " << error << "\n";
      return 2;
    }
    for (const MemoryPicture &picture : pictures) {
      if (!write(picture.path, picture.text))
        return 2;
      // On stderr, so that --json's document stays alone on stdout.
      errs() << "wrote " << picture.summary << "\n";
    }
  }
  if (estimateTrace.empty() && estimateSvg.empty())
    return 0;
  // The predicted timeline: the schedule's action lists under unit costs (forward 1,
  // backward 2), as the bubble above.
  pipeline::ScheduleKind kind;
  if (e.schedule.empty() || !pipeline::parseScheduleKind(e.schedule, kind)) {
    errs() << "tessel: error: --trace and --svg draw a pipeline schedule, but the mesh of '"
           << inputFile << "' has no pp axis\n";
    return 2;
  }
  std::string error;
  int p = static_cast<int>(e.stages), m = static_cast<int>(e.microbatches),
      v = static_cast<int>(e.virtualStages);
  auto lists = pipeline::buildSchedule(kind, p, m, v, error);
  // With a cluster, the step-time model's timeline: each stage's predicted forward, backward
  // and transfer times, in seconds.
  pipeline::Timeline timeline = estimateCluster.empty()
                                    ? pipeline::simulate(kind, p, m, v, lists, pipeline::Costs())
                                    : prediction.timeline;
  std::string title = e.model + ": " + e.schedule + ", " + std::to_string(p) + " stages, " +
                      std::to_string(m) + " micro-batches" +
                      (v > 1 ? ", " + std::to_string(v) + " virtual" : std::string()) +
                      (estimateCluster.empty() ? " (predicted, unit costs)"
                                               : " (predicted on " + cluster.name + ")");
  if (!estimateTrace.empty() && !write(estimateTrace, pipeline::chromeTraceJson(timeline, title)))
    return 2;
  if (!estimateSvg.empty() && !write(estimateSvg, pipeline::scheduleSvg(timeline, title)))
    return 2;
  return 0;
}

} // namespace tessel::driver
