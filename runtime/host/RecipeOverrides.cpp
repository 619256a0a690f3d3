//===- RecipeOverrides.cpp - Recipe numbers changed at run time -----------===//

#include "runtime/host/RecipeOverrides.h"

#include <functional>

namespace tessel::rt {

namespace {

/// One overridable number: the option that sets it, its config entry, and the kernels and
/// parameters that carry it.
struct Target {
  const char *option, *config, *kernel, *param;
};

constexpr Target kLr{"--lr", "train.optimizer.lr", "learning_rate", "lr"};
constexpr Target kMinLr{"--min-lr", "train.lr_schedule.min_lr", "learning_rate", "min_lr"};
constexpr Target kWarmup{"--warmup", "train.lr_schedule.warmup", "learning_rate", "warmup"};
constexpr Target kDecaySteps{"--decay-steps", "train.lr_schedule.steps", "learning_rate",
                             "steps"};
constexpr Target kBeta1{"--beta1", "train.optimizer.beta1", "adamw", "beta1"};
constexpr Target kBeta2{"--beta2", "train.optimizer.beta2", "adamw", "beta2"};
constexpr Target kEps{"--eps", "train.optimizer.eps", "adamw", "eps"};
constexpr Target kMomentum{"--momentum", "train.optimizer.momentum", "sgd", "momentum"};
constexpr Target kClip{"--clip", "train.clip", "clip_coefficient", "max"};
/// Weight decay is on AdamW's and SGD's calls, and only on those the spec decays (a call with
/// no decay keeps none).
constexpr Target kWeightDecay{"--weight-decay", "train.optimizer.weight_decay", nullptr,
                              "weight_decay"};

bool carries(const planfile::Instr &instr, const Target &t) {
  if (t.kernel)
    return instr.kernel == t.kernel;
  return instr.kernel == "adamw" || instr.kernel == "sgd";
}

void setConfig(planfile::Plan &plan, const char *name, planfile::AttrValue value) {
  for (planfile::Attr &a : plan.config)
    if (a.name == name) {
      a.value = value;
      return;
    }
  plan.config.push_back({name, value});
}

/// Sets `t`'s parameter to `value` on every call that carries it; false when no call does.
bool apply(planfile::Plan &plan, const Target &t, planfile::AttrValue value) {
  bool found = false;
  for (planfile::Program &p : plan.programs)
    for (planfile::Instr &instr : p.instrs) {
      if (!carries(instr, t))
        continue;
      for (planfile::Attr &a : instr.attrs) {
        if (a.name != t.param)
          continue;
        // A call the spec does not decay (a zero weight decay) keeps none.
        if (&t == &kWeightDecay && std::get_if<double>(&a.value) &&
            std::get<double>(a.value) == 0.0)
          continue;
        a.value = value;
        found = true;
      }
    }
  if (found)
    setConfig(plan, t.config, value);
  return found;
}

const char *optimizerOf(const planfile::Plan &plan) {
  for (const planfile::Attr &a : plan.config)
    if (a.name == "train.optimizer.kind")
      if (auto kind = std::get_if<std::string>(&a.value))
        return kind->c_str();
  return "this";
}

} // namespace

std::vector<planfile::Attr> RecipeOverrides::entries() const {
  std::vector<planfile::Attr> out;
  auto add = [&](const Target &t, const auto &value) {
    if (value)
      out.push_back({t.config, *value});
  };
  add(kLr, lr);
  add(kMinLr, minLr);
  add(kWarmup, warmup);
  add(kDecaySteps, decaySteps);
  add(kWeightDecay, weightDecay);
  add(kBeta1, beta1);
  add(kBeta2, beta2);
  add(kEps, eps);
  add(kMomentum, momentum);
  add(kClip, clip);
  return out;
}

bool applyRecipeOverrides(planfile::Plan &plan, const RecipeOverrides &o, std::string &error) {
  planfile::Plan edited = plan;
  struct Step {
    const Target &target;
    std::optional<planfile::AttrValue> value;
    std::function<std::string()> why;
  };
  const std::string optimizer = optimizerOf(plan);
  auto notOptimizer = [&](const char *which) {
    return [&, which] {
      return std::string("the plan's optimizer is ") + optimizer + ", which has no " + which;
    };
  };
  auto noSchedule = [] { return std::string("the plan has no learning-rate schedule"); };
  auto wrap = [](const auto &v) -> std::optional<planfile::AttrValue> {
    if (v)
      return planfile::AttrValue(*v);
    return std::nullopt;
  };
  const Step steps[] = {
      {kLr, wrap(o.lr), noSchedule},
      {kMinLr, wrap(o.minLr), noSchedule},
      {kWarmup, wrap(o.warmup), noSchedule},
      {kDecaySteps, wrap(o.decaySteps), noSchedule},
      {kWeightDecay, wrap(o.weightDecay),
       [] {
         return std::string("the spec decays no parameter (weight_decay = 0); a decay set "
                            "in the spec can be changed here, not one that is absent");
       }},
      {kBeta1, wrap(o.beta1), notOptimizer("betas")},
      {kBeta2, wrap(o.beta2), notOptimizer("betas")},
      {kEps, wrap(o.eps), notOptimizer("eps")},
      {kMomentum, wrap(o.momentum), notOptimizer("momentum")},
      {kClip, wrap(o.clip),
       [] {
         return std::string("the plan was compiled without gradient clipping (clip = 0); set "
                            "`clip` in the train section and recompile");
       }},
  };
  for (const Step &s : steps)
    if (s.value && !apply(edited, s.target, *s.value)) {
      error = std::string(s.target.option) + ": " + s.why();
      return false;
    }
  plan = std::move(edited);
  return true;
}

} // namespace tessel::rt
