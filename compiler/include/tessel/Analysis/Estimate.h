//===- Estimate.h - Memory and communication a plan implies -----*- C++ -*-===//
//
// What `tessel estimate` prints: per rank, the bytes of parameters, gradients, optimizer
// state and activations a plan needs, and per mesh axis the bytes each rank sends in one
// optimizer step. Everything is read off the plan itself (its state tensors, memory plan and
// collectives), so the figures describe exactly what the runtime will allocate and send.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_ANALYSIS_ESTIMATE_H
#define TESSEL_ANALYSIS_ESTIMATE_H

#include "common/plan/PlanFile.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace llvm::json {
class OStream;
} // namespace llvm::json

namespace tessel {

struct RankEstimate {
  uint32_t rank = 0;
  /// Activations are the arena plus, with a pipeline, the stash: the most the rank keeps at
  /// once of the micro-batches in flight (between a stage's forward and its backward), from
  /// the runtime's own walk of the rank's action list, so it is what a run will hold.
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, stash = 0;
  int64_t stage = 0, inFlight = 0;
  /// Generation: the weights a forward pass reads (the 16-bit working copies under mixed
  /// precision, else the parameters), and the bytes of keys and values one token adds to a
  /// KV cache: 2 × kv heads × head × element bytes summed over the rank's attention calls
  /// (its layers, its share of the kv heads under tp).
  double inferenceWeights = 0, kvBytesPerToken = 0;
  int64_t attentionLayers = 0;
  double peak() const { return parameters + gradients + optimizer + activations; }
};

struct PlanEstimate {
  std::string model, precision;
  uint32_t worldSize = 1;
  int64_t accumulation = 1;
  double parameterCount = 0;       ///< Ψ: elements of all parameters, whole.
  /// For a mixture of experts (set from the graph; the plan does not know which parameters are
  /// an expert's): the parameters a token computes with, those of the experts, and the routing
  /// ("top 2 of 8 experts"). Zero and empty otherwise.
  double activeParameterCount = 0, expertParameterCount = 0;
  std::string routing;
  std::vector<RankEstimate> ranks; ///< One per rank, in rank order.
  /// Bytes one rank sends per optimizer step, by communicator group ("dp", "tp", "dp_tp").
  std::map<std::string, double> communication;
  /// The pipeline schedule, when the mesh has a pp axis: its name, the bubble read off the
  /// action lists (idle over compute time), the closed form where there is one (negative
  /// otherwise), and the most micro-batches whose activations are alive on a rank.
  std::string schedule;
  int64_t stages = 1, microbatches = 1, virtualStages = 1, inFlight = 0;
  double bubble = 0, bubbleFormula = -1;
};

/// Reads the estimate off `plan`. Every rank of a pipeline stage holds state of the same
/// shapes and runs the same programs, so the figures are worked out once per stage, on its
/// first rank, and given to each of its ranks: the estimate's cost does not grow with dp or
/// tp. A rank counts the state tensors its pipeline stage holds.
/// State takes the bytes the plan allocates for it, at each tensor's element type: under
/// 16-bit precision (-tessel-mixed-precision) the parameters are the fp32 master weights and
/// their persistent 16-bit working copies, the gradients and moments are fp32 as under fp32,
/// and the activations are 16-bit arena buffers. Activations
/// are the peak of the largest program's arena. Collectives move, per rank, what a ring
/// moves: 2(k-1)/k of the data for an all-reduce over k ranks, (k-1)/k of the whole tensor for
/// an all-gather or a reduce-scatter; a pipeline stage sends its activations (gradients) to
/// the next (previous) stage once per micro-batch, each at its operands' element type. The
/// figure per group is the most any rank sends.
PlanEstimate estimatePlan(const planfile::Plan &plan);

/// A table for people: one row per run of consecutive ranks with the same figures.
std::string formatEstimate(const PlanEstimate &e);
/// With a device's memory (bytes): the tokens of KV cache (sequences × context, summed over
/// the sequences of a batch) that fit on each rank beside the weights it reads, the figure
/// of the rank that fits fewest. Activations of the decode step itself are not counted.
/// Zero when the plan has no attention or the weights alone do not fit.
double kvCacheTokens(const PlanEstimate &e, double deviceMemory);
std::string formatKvCacheFit(const PlanEstimate &e, double deviceMemory,
                             const std::string &device);
/// The same as JSON: the members of the estimate's object, written into the object `j` has
/// open (so that a caller may add members of its own, such as a step-time prediction).
void estimateJsonMembers(llvm::json::OStream &j, const PlanEstimate &e);

} // namespace tessel

#endif // TESSEL_ANALYSIS_ESTIMATE_H
