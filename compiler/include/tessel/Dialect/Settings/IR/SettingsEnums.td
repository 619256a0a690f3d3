//===- SettingsEnums.td - Words of the module's settings ---*- tablegen -*-===//
//
// The words of the spec's `parallel` and `train` sections that passes switch on, as enums.
// Their spellings are the spec's, the IR's and the plan file's.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_SETTINGS_ENUMS
#define TESSEL_SETTINGS_ENUMS

include "tessel/Dialect/Settings/IR/SettingsDialect.td"
include "mlir/IR/EnumAttr.td"

// Which activations the backward pass recomputes rather than keeps.
def Settings_RecomputeMode : I32EnumAttr<"RecomputeMode", "the recompute mode", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Selective", 1, "selective">,
      I32EnumAttrCase<"Full", 2, "full">]> {
  let cppNamespace = "::tessel::settings";
  let genSpecializedAttr = 0;
}

// How attention under context parallelism meets the keys of other cp ranks.
def Settings_ContextMode : I32EnumAttr<"ContextMode", "the context-parallel attention", [
      I32EnumAttrCase<"AllGather", 0, "allgather">,
      I32EnumAttrCase<"Ring", 1, "ring">]> {
  let cppNamespace = "::tessel::settings";
  let genSpecializedAttr = 0;
}

def Settings_OptimizerKind : I32EnumAttr<"OptimizerKind", "the optimizer", [
      I32EnumAttrCase<"AdamW", 0, "adamw">,
      I32EnumAttrCase<"Adam", 1, "adam">,
      I32EnumAttrCase<"Sgd", 2, "sgd">]> {
  let cppNamespace = "::tessel::settings";
  let genSpecializedAttr = 0;
}

def Settings_LrSchedule : I32EnumAttr<"LrSchedule", "the learning-rate schedule", [
      I32EnumAttrCase<"Constant", 0, "constant">,
      I32EnumAttrCase<"Cosine", 1, "cosine">,
      I32EnumAttrCase<"Linear", 2, "linear">]> {
  let cppNamespace = "::tessel::settings";
  let genSpecializedAttr = 0;
}
def Settings_LrScheduleAttr : EnumAttr<Settings_Dialect, Settings_LrSchedule, "lr_schedule">;

#endif // TESSEL_SETTINGS_ENUMS
