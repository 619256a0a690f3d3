//===- RecipeOverrides.h - Recipe numbers changed at run time ---*- C++ -*-===//
//
// The training recipe's numbers that no shape depends on (the learning rate and its schedule,
// the optimizer's hyperparameters, the clipping threshold) live in the plan as parameters of
// the kernels that use them: `learning_rate`, `adamw`, `sgd`, `clip_coefficient`. A run may
// override them without recompiling (a sweep reuses one executable): each override rewrites
// those parameters and the plan's `train.*` entry that records the value, before any rank
// decodes the plan. What shapes the plan (the batch, the micro-batch, the precision) cannot
// be overridden, and an override the plan has nothing to apply to (a clipping threshold for a
// plan compiled without clipping, AdamW's betas for SGD) is refused with the reason.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_RECIPEOVERRIDES_H
#define TESSEL_RUNTIME_HOST_RECIPEOVERRIDES_H

#include "common/plan/PlanFile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt {

struct RecipeOverrides {
  std::optional<double> lr, minLr, weightDecay, beta1, beta2, eps, momentum, clip;
  std::optional<int64_t> warmup, decaySteps;

  /// The overrides given, as ("train.optimizer.lr", value) pairs named as the plan's config
  /// names them (the run record lists them so).
  std::vector<planfile::Attr> entries() const;
};

/// Rewrites `plan`'s kernels and config for `overrides`. False with the reason (in the
/// command line's terms) when one cannot apply; `plan` is then unchanged.
bool applyRecipeOverrides(planfile::Plan &plan, const RecipeOverrides &overrides,
                          std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_RECIPEOVERRIDES_H
