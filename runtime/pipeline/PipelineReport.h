//===- PipelineReport.h - What a pipelined run measured ---------*- C++ -*-===//
//
// After a pipelined run the trainer says how its last step went — the measured bubble beside
// the compiler's prediction, the micro-batches in flight — and, when asked, draws the step's
// timeline with the pictures `tessel estimate` draws of the predicted one (Timeline.h), so the
// two can be put side by side.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_PIPELINE_PIPELINEREPORT_H
#define TESSEL_RUNTIME_PIPELINE_PIPELINEREPORT_H

#include "common/layout/PipelineLayout.h"
#include "common/plan/PlanFile.h"
#include "common/schedule/Timeline.h"

#include <cstdint>
#include <string>

namespace tessel::rt {

/// One line on the last step's timeline: "pipeline (step N, measured): bubble B of compute time
/// (predicted P), at most K micro-batches in flight per rank".
std::string describeMeasuredPipeline(const planfile::Plan &plan,
                                     const pipeline::PipelineConfig &config,
                                     const pipeline::Timeline &timeline, int64_t step);

/// Writes the timeline as a Chrome trace to `tracePath` and as an SVG to `svgPath` (each
/// skipped when empty); false with the reason.
bool writeTimelinePictures(const planfile::Plan &plan, const pipeline::PipelineConfig &config,
                           const pipeline::Timeline &timeline, int64_t step,
                           const std::string &tracePath, const std::string &svgPath,
                           std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_PIPELINE_PIPELINEREPORT_H
