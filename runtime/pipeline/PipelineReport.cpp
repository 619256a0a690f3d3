//===- PipelineReport.cpp - What a pipelined run measured -----------------===//

#include "runtime/pipeline/PipelineReport.h"

#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cstdio>

namespace tessel::rt {

std::string describeMeasuredPipeline(const planfile::Plan &plan,
                                     const pipeline::PipelineConfig &config,
                                     const pipeline::Timeline &timeline, int64_t step) {
  char text[256];
  std::snprintf(text, sizeof text, "pipeline (step %lld, measured): bubble %.4f of compute time",
                static_cast<long long>(step), timeline.bubbleOverIdeal);
  std::string line = text;
  const planfile::Attr *predicted = plan.findConfig("pipeline.bubble");
  if (predicted && std::holds_alternative<double>(predicted->value)) {
    std::snprintf(text, sizeof text, " (predicted %.4f)", std::get<double>(predicted->value));
    line += text;
  }
  int inFlight = 0;
  for (int n : timeline.peakInFlight)
    inFlight = std::max(inFlight, n);
  // An interleaved chunk holds 1/v of a rank's layers: count (micro-batch, chunk) pairs.
  line += ", at most " + std::to_string(inFlight) +
          (config.virtualStages > 1 ? " micro-batch chunks" : " micro-batches") +
          " in flight per rank";
  return line;
}

bool writeTimelinePictures(const planfile::Plan &plan, const pipeline::PipelineConfig &config,
                           const pipeline::Timeline &timeline, int64_t step,
                           const std::string &tracePath, const std::string &svgPath,
                           std::string &error) {
  std::string title =
      plan.model + ": " + pipeline::scheduleKindName(config.schedule) + ", " +
      std::to_string(config.stages) + " stages, " + std::to_string(config.microbatches) +
      " micro-batches" +
      (config.virtualStages > 1 ? ", " + std::to_string(config.virtualStages) + " virtual"
                                : std::string()) +
      " (measured, step " + std::to_string(step) + ")";
  if (!tracePath.empty() &&
      !writeFileAtomically(tracePath, pipeline::chromeTraceJson(timeline, title), error))
    return false;
  return svgPath.empty() ||
         writeFileAtomically(svgPath, pipeline::scheduleSvg(timeline, title), error);
}

} // namespace tessel::rt
