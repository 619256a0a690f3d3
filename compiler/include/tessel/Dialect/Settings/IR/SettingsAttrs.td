//===- SettingsAttrs.td - The module's settings ------------*- tablegen -*-===//
//
// One attribute per settings section. Each field that is left out takes its default, the
// same default the spec's section has, and is left out again when printed. Each attribute
// verifies its own fields; SettingsDialect.cpp checks that `tessel.*` names hold them.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_SETTINGS_ATTRS
#define TESSEL_SETTINGS_ATTRS

include "tessel/Dialect/Settings/IR/SettingsDialect.td"
include "tessel/Dialect/Settings/IR/SettingsEnums.td"
include "mlir/IR/AttrTypeBase.td"

class Settings_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Settings_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

// Fields of the sections, each with its default.
class Settings_I64<string value, string desc>
    : DefaultValuedParameter<"int64_t", value, desc>;
class Settings_F64<string value, string desc>
    : DefaultValuedParameter<"::llvm::APFloat", "::llvm::APFloat(" # value # ")", desc> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let parser = [{ ::tessel::settings::parseF64($_parser) }];
  let printer = [{ $_printer.printFloat($_self) }];
}
class Settings_Bool<string value, string desc>
    : DefaultValuedParameter<"bool", value, desc> {
  let parser = [{ ::tessel::settings::parseBool($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
}
class Settings_String<string desc, string value = "\"\"">
    : StringRefParameter<desc, value>;
class Settings_Enum<EnumAttrInfo info, string value, string desc>
    : DefaultValuedParameter<info.cppNamespace # "::" # info.className,
                             info.cppNamespace # "::" # info.className # "::" # value, desc>;
class Settings_OptionalF64<string desc>
    : OptionalParameter<"std::optional<::llvm::APFloat>", desc> {
  let comparator = "$_lhs.has_value() == $_rhs.has_value() && "
                   "(!$_lhs || $_lhs->bitwiseIsEqual(*$_rhs))";
  let parser = [{ ::tessel::settings::parseOptionalF64($_parser) }];
  let printer = [{ $_printer.printFloat(*$_self) }];
}
// A nested section, printed without its `#tessel.name` prefix.
class Settings_Section<string attr, string desc>
    : DefaultValuedParameter<"::tessel::settings::" # attr,
                             "::tessel::settings::defaultSettings<::tessel::settings::"
                                 # attr # ">($_ctxt)", desc> {
  let printer = [{ $_printer.printStrippedAttrOrType($_self) }];
}

def Settings_ScheduleKindParameter
    : DefaultValuedParameter<"::tessel::pipeline::ScheduleKind",
                             "::tessel::pipeline::ScheduleKind::OneFOneB",
                             "the pipeline schedule (common/schedule/ScheduleKind.h)"> {
  let parser = [{ ::tessel::settings::parseScheduleKind($_parser) }];
  let printer = [{ $_printer.printKeywordOrString(::tessel::pipeline::scheduleKindName($_self)) }];
}

def Settings_ParallelAttr : Settings_Attr<"Parallel", "parallel"> {
  let summary = "The spec's `parallel` section: the mesh and how dims map onto it";
  let description = [{
    `mesh` gives each mesh axis its size (pp, dp, ep, cp, tp); `shard` maps a dim to the
    axes that split it (several axes: their group, outermost first). The rest are the
    section's settings: sequence parallelism, the ZeRO stage, the pipeline schedule and its
    micro-batches and virtual stages (and `stage_map`, the layers of each stage when the spec
    places them), recomputation, context-parallel attention, and gradient buckets.

    ```mlir
    #tessel.parallel<mesh = {dp = 2 : i64, tp = 2 : i64}, shard = {heads = ["tp"]}, zero = 1>
    ```
  }];
  let parameters = (ins
      DefaultValuedParameter<"::mlir::DictionaryAttr", "::mlir::DictionaryAttr::get($_ctxt)",
                             "axis name to its size">:$mesh,
      DefaultValuedParameter<"::mlir::DictionaryAttr", "::mlir::DictionaryAttr::get($_ctxt)",
                             "dim name to the axes that split it">:$shard,
      Settings_Bool<"false", "sequence parallelism">:$sequence_parallel,
      Settings_I64<"0", "ZeRO stage">:$zero,
      Settings_ScheduleKindParameter:$schedule,
      Settings_I64<"1", "micro-batches per step">:$microbatches,
      Settings_I64<"1", "virtual stages per pipeline rank">:$virtual_stages,
      DefaultValuedParameter<"::mlir::ArrayAttr", "::mlir::ArrayAttr::get($_ctxt, {})",
                             "layer indices per stage">:$stage_map,
      Settings_Enum<Settings_RecomputeMode, "None", "recomputation">:$recompute,
      Settings_Enum<Settings_ContextMode, "AllGather", "context-parallel attention">:$context_attention,
      Settings_I64<"26214400", "gradient bucket bytes">:$bucket_bytes,
      Settings_Bool<"true", "gradient reductions overlap the backward pass">:$overlap);
  let extraClassDeclaration = [{
    /// The size of mesh axis `axis`, 1 when the mesh lacks it.
    int64_t axisSize(::llvm::StringRef axis) const;
    /// The axes `dim` is mapped to, in the order the spec lists them (none when unmapped).
    ::llvm::SmallVector<::llvm::StringRef, 2> axesOf(::llvm::StringRef dim) const;
    /// These settings with `dim` mapped to `axes` (none: unmapped).
    ParallelAttr withRule(::llvm::StringRef dim, ::llvm::ArrayRef<::llvm::StringRef> axes) const;
  }];
}

def Settings_OptimizerAttr : Settings_Attr<"Optimizer", "optimizer"> {
  let summary = "The optimizer of the spec's `train` section";
  let description = [{
    The update rule and its hyper-parameters; `decay` lists, comma-separated, the parameter
    classes weight decay falls on (tessel/Dialect/Graph/Transforms/ParameterClasses.h).
  }];
  let parameters = (ins
      Settings_Enum<Settings_OptimizerKind, "AdamW", "update rule">:$kind,
      Settings_F64<"1e-3", "learning rate">:$lr,
      Settings_F64<"0.9", "first moment's decay">:$beta1,
      Settings_F64<"0.999", "second moment's decay">:$beta2,
      Settings_F64<"1e-8", "added to the second moment's root">:$eps,
      Settings_F64<"0.0", "weight decay">:$weight_decay,
      Settings_String<"parameter classes weight decay falls on",
                      "\"weights,embeddings\"">:$decay,
      Settings_F64<"0.0", "momentum (sgd)">:$momentum);
}

def Settings_LearningRateAttr : Settings_Attr<"LearningRate", "learning_rate"> {
  let summary = "How the learning rate moves: the `train` section's schedule";
  let parameters = (ins
      Settings_Enum<Settings_LrSchedule, "Constant", "schedule">:$kind,
      Settings_I64<"0", "warm-up steps">:$warmup,
      Settings_F64<"0.0", "the rate the schedule ends at">:$min_lr);
}

def Settings_TrainAttr : Settings_Attr<"Train", "train"> {
  let summary = "The spec's `train` section";
  let description = [{
    The batch (sequences per optimizer step over all data ranks), the micro-batch (per rank
    per forward/backward) and the accumulation steps between them; the optimizer and its
    learning-rate schedule; clipping, precision, data, evaluation, checkpoints and logging.

    ```mlir
    #tessel.train<batch = 16, micro_batch = 4, accumulation = 4, steps = 600,
                  optimizer = <lr = 6.000000e-04, weight_decay = 1.000000e-01>,
                  lr_schedule = <kind = cosine, warmup = 50>, precision = "bf16">
    ```
  }];
  let parameters = (ins
      Settings_I64<"1", "sequences per step">:$batch,
      Settings_I64<"1", "sequences per rank per pass">:$micro_batch,
      Settings_I64<"1", "passes per step">:$accumulation,
      Settings_I64<"1000", "steps">:$steps,
      Settings_Section<"OptimizerAttr", "the optimizer">:$optimizer,
      Settings_Section<"LearningRateAttr", "the learning-rate schedule">:$lr_schedule,
      Settings_F64<"0.0", "max global gradient norm; 0 disables clipping">:$clip,
      Settings_String<"fp32, bf16 or fp16", "\"fp32\"">:$precision,
      Settings_String<"training tokens">:$data,
      Settings_String<"tokenizer", "\"byte\"">:$tokenizer,
      Settings_I64<"1337", "seed">:$seed,
      Settings_I64<"0", "steps between evaluations">:$eval_every,
      Settings_I64<"8", "batches per evaluation">:$eval_batches,
      Settings_F64<"0.1", "fraction of the data held out">:$eval_fraction,
      Settings_String<"validation tokens">:$eval_data,
      Settings_I64<"0", "steps between checkpoints">:$checkpoint_every,
      Settings_String<"checkpoint folder">:$checkpoint_dir,
      Settings_I64<"1", "steps between log lines">:$log_every,
      Settings_String<"weights the run starts from">:$init_from);
}

def Settings_PipelineAttr : Settings_Attr<"Pipeline", "pipeline"> {
  let summary = "The pipeline schedule's figures, as -tessel-pipeline-schedule found them";
  let description = [{
    The schedule, its stages, micro-batches and virtual stages; the bubble it leaves over the
    ideal time (`bubble`) and, for schedules with a closed form, the formula's
    (`bubble_formula`); the most micro-batches any stage holds at once (`in_flight`).
  }];
  let parameters = (ins
      Settings_ScheduleKindParameter:$schedule,
      Settings_I64<"1", "stages">:$stages,
      Settings_I64<"1", "micro-batches">:$microbatches,
      Settings_I64<"1", "virtual stages">:$virtual_stages,
      Settings_F64<"0.0", "bubble over the ideal time">:$bubble,
      Settings_I64<"1", "micro-batches in flight">:$in_flight,
      Settings_OptionalF64<"the closed form's bubble">:$bubble_formula);
}

#endif // TESSEL_SETTINGS_ATTRS
