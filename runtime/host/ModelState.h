//===- ModelState.h - A model's parameters and state on the host *- C++ -*-===//
//
// What training and generation do with a plan's state as whole tensors: their shapes and the
// model's fingerprint, checkpoints loaded into the ranks whatever the layout, the parameters'
// initial streams, the random streams of a checkpoint, and the finiteness checks.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_MODELSTATE_H
#define TESSEL_RUNTIME_HOST_MODELSTATE_H

#include "common/plan/PlanFile.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/core/Rng.h"
#include "runtime/host/Ranks.h"
#include "runtime/support/Json.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

/// The shape of the whole tensor, of which each rank holds a block.
std::vector<int64_t> wholeShape(const planfile::Plan &plan, const planfile::StateTensor &t);

/// The parameters' whole shapes: what a checkpoint holds, whatever the layout over ranks.
std::vector<std::pair<std::string, std::vector<int64_t>>> parameterShapes(const planfile::Plan &plan);

/// Whether all `n` values are finite. Tests the exponent bits, so the loop vectorises and a
/// pass over every parameter costs little beside a training step.
bool allFinite(const float *x, size_t n);

/// Names and shapes of the parameters, hashed: two models with the same fingerprint can
/// exchange checkpoints.
std::string fingerprint(const planfile::Plan &plan);

/// A random stream's state as a checkpoint's JSON keeps it (decimal strings), and back; false
/// for anything a run did not write.
Json rngToJson(const Rng &rng);
bool rngFromJson(const Json *j, Rng &rng);

/// After the host sets the parameters, their 16-bit working copies (mixed precision) are made
/// again from them; a plan without working copies has nothing to run.
bool refreshWorkingCopies(Ranks &ranks, std::string &error);

/// Loads `path`, checks it belongs to `plan`'s model, and copies its (whole) tensors into the
/// ranks' state: parameters, and the optimizer state too when `withOptimizer`.
/// `sameModel`: the checkpoint must be of the plan's model (a resume or sampling); without it,
/// of any model whose parameters have the same names and shapes (pretrained weights).
std::unique_ptr<LoadedCheckpoint> loadState(const planfile::Plan &plan, Ranks &ranks,
                                            const std::string &path, bool withOptimizer,
                                            std::string &error, bool sameModel = true);

/// The stream a parameter's initial values are drawn from: a function of the seed and the
/// parameter's full name alone, so that neither the plan's order of its state (which a pipeline
/// changes) nor the layout, stage or rank changes a model's starting point.
Rng parameterRng(uint64_t seed, const std::string &name);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_MODELSTATE_H
