//===- PipelineLayout.h - What a pipelined plan runs where ------*- C++ -*-===//
//
// A plan with `pipeline.stages` > 1 trains as a pipeline: its model is cut into chunks, each
// with its own programs on the ranks of one stage (docs/plan-format.md, "Pipeline
// parallelism"). Before anything runs, the runtime reads from the plan what every rank of the
// pipeline agrees on: the schedule's action lists (rebuilt from the config and checked), the
// programs of each chunk, and the values each message between neighbouring chunks carries.
// A plan whose programs break the contract — a value that no program writes, one that would
// have to skip a chunk, ports of one value that disagree — is refused here, not mid-step.
// `tessel estimate` reads the same layout, so its stash and pipeline traffic are the runtime's.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_LAYOUT_PIPELINELAYOUT_H
#define TESSEL_COMMON_LAYOUT_PIPELINELAYOUT_H

#include "common/plan/PlanFile.h"
#include "common/schedule/Schedule.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessel::pipeline {

/// A plan's `pipeline.*` config. `stages` 1 (or no config): the plan has no pipeline.
struct PipelineConfig {
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::OneFOneB;
  int stages = 1, microbatches = 1, virtualStages = 1;

  bool enabled() const { return stages > 1; }
  /// Model chunks: global virtual stages.
  int chunks() const { return stages * virtualStages; }
};

/// Reads the config of `plan`; false with the reason for an unknown schedule or a size that
/// is not positive.
bool readPipelineConfig(const planfile::Plan &plan, PipelineConfig &config, std::string &error);

/// The host inputs of a pipeline program, and the outputs the host reads from the last chunk.
bool isHostInput(const std::string &port);
bool isHostOutput(const std::string &port);

/// The programs one kind of run executes per chunk and the values passed between them: a
/// training step ("forward.c" and "backward.c", or "backward_input.c" and "backward_weight.c"
/// under zbh1), or a forward-only chain ("eval.c", "sample.c").
struct PipelineChain {
  std::string kind; ///< "step", "eval" or "sample".
  /// Per chunk, its programs in the order a micro-batch meets them.
  std::vector<std::vector<std::string>> programs;
  /// Per chunk c, the values (by name, in name order) its forward program sends to chunk c + 1,
  /// and those its backward program sends to chunk c - 1 (a step only).
  std::vector<std::vector<std::string>> activations, gradients;
  /// Per value: its elements on one rank, and its bytes (in the ports' element type).
  std::map<std::string, int64_t> elements;
  std::map<std::string, uint64_t> bytes;

  /// The elements and the bytes of a message of `ports`.
  int64_t messageElements(const std::vector<std::string> &ports) const;
  uint64_t messageBytes(const std::vector<std::string> &ports) const;
};

/// The pipeline of a plan, as every rank sees it.
class PipelineLayout {
public:
  /// Reads the pipeline of `plan` (which must have passed validatePlan): null with `error`
  /// empty when the plan has none, null with the reason when it is inconsistent.
  static std::unique_ptr<PipelineLayout> create(const planfile::Plan &plan, std::string &error);

  const PipelineConfig &config() const { return config_; }
  /// The action list of pipeline stage `stage` for one step.
  const std::vector<pipeline::Action> &actions(uint32_t stage) const { return lists_[stage]; }
  const PipelineChain &step() const { return step_; }
  /// The "eval" or "sample" chain, or null if the plan has none.
  const PipelineChain *chain(const std::string &kind) const;
  /// The global chunk of local chunk `local` on `stage`.
  int chunkOf(uint32_t stage, int local) const;
  /// The world rank of pipeline stage `stage` in the "pp" instance that holds `rank`.
  uint32_t peerOf(uint32_t rank, uint32_t stage) const;
  /// The world rank the host reads the last chunk's outputs from: the lowest of the last stage.
  uint32_t outputRank() const { return outputRank_; }
  /// The world ranks whose actions make up the recorded timeline, by stage: the "pp" instance
  /// that holds world rank 0.
  const std::vector<uint32_t> &recordedRanks() const { return recorded_; }

private:
  PipelineLayout() = default;

  PipelineConfig config_;
  std::vector<std::vector<uint32_t>> instanceOf_; ///< Per world rank: its "pp" instance.
  std::vector<std::vector<pipeline::Action>> lists_;
  PipelineChain step_;
  std::map<std::string, PipelineChain> chains_;
  uint32_t outputRank_ = 0;
  std::vector<uint32_t> recorded_;
};

} // namespace tessel::pipeline

#endif // TESSEL_COMMON_LAYOUT_PIPELINELAYOUT_H
