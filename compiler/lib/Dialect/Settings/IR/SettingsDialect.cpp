//===- SettingsDialect.cpp - The module's settings ------------------------===//

#include "tessel/Dialect/Settings/IR/SettingsDialect.h"

#include "common/mesh/MeshAxes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessel::settings;

#include "tessel/Dialect/Settings/IR/SettingsDialect.cpp.inc"
#include "tessel/Dialect/Settings/IR/SettingsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tessel/Dialect/Settings/IR/SettingsAttrs.cpp.inc"

void SettingsDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tessel/Dialect/Settings/IR/SettingsAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// `tessel.*` attributes
//===----------------------------------------------------------------------===//

namespace {

bool positiveSizes(Attribute value) {
  auto dims = dyn_cast<DictionaryAttr>(value);
  return dims && llvm::all_of(dims, [](NamedAttribute d) {
           auto size = dyn_cast<IntegerAttr>(d.getValue());
           return size && size.getInt() >= 1;
         });
}

bool nonNegative(Attribute value) {
  auto n = dyn_cast<IntegerAttr>(value);
  return n && n.getInt() >= 0;
}

/// Each `tessel.*` name: whether only a module carries it, what it holds, and its check.
struct Setting {
  StringLiteral name;
  bool moduleOnly;
  StringLiteral holds;
  bool (*check)(Attribute);
};
const Setting kSettings[] = {
    {"parallel", true, "#tessel.parallel<...>", [](Attribute v) { return isa<ParallelAttr>(v); }},
    {"train", true, "#tessel.train<...>", [](Attribute v) { return isa<TrainAttr>(v); }},
    {"pipeline", true, "#tessel.pipeline<...>", [](Attribute v) { return isa<PipelineAttr>(v); }},
    {"dims", true, "each dim's size (a positive integer)", positiveSizes},
    {"layers", true, "a layer count", nonNegative},
    {"decode_refused", true, "a reason", [](Attribute v) { return isa<StringAttr>(v); }},
    {"state", true, "a dictionary", [](Attribute v) { return isa<DictionaryAttr>(v); }},
    {"stages", true, "a dictionary", [](Attribute v) { return isa<DictionaryAttr>(v); }},
    {"program", false, "a program's name", [](Attribute v) { return isa<StringAttr>(v); }},
    {"stage", false, "a pipeline stage", nonNegative},
    {"async", false, "no value", [](Attribute v) { return isa<UnitAttr>(v); }},
};

LogicalResult verifySetting(Operation *op, StringRef name, Attribute value) {
  auto error = [&]() { return op->emitOpError() << "'tessel." << name << "' "; };
  const Setting *setting =
      llvm::find_if(kSettings, [&](const Setting &s) { return s.name == name; });
  if (setting == std::end(kSettings)) {
    std::string known;
    for (const Setting &s : kSettings)
      known += (known.empty() ? "" : ", ") + s.name.str();
    return error() << "is not a setting Tessel knows (" << known << ")";
  }
  if (setting->moduleOnly && !isa<ModuleOp>(op))
    return error() << "is a module's setting";
  if (!setting->check(value))
    return error() << "holds " << setting->holds << ", not " << value;
  return success();
}

} // namespace

LogicalResult SettingsDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  name.consume_front("tessel.");
  return verifySetting(op, name, attr.getValue());
}

//===----------------------------------------------------------------------===//
// Field parsers
//===----------------------------------------------------------------------===//

FailureOr<APFloat> tessel::settings::parseF64(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return APFloat(value);
}

FailureOr<std::optional<APFloat>> tessel::settings::parseOptionalF64(AsmParser &parser) {
  FailureOr<APFloat> value = parseF64(parser);
  if (failed(value))
    return failure();
  return std::optional<APFloat>(*value);
}

FailureOr<bool> tessel::settings::parseBool(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(), "expected true or false");
}

FailureOr<tessel::pipeline::ScheduleKind> tessel::settings::parseScheduleKind(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  std::string word;
  if (parser.parseKeywordOrString(&word))
    return failure();
  pipeline::ScheduleKind kind;
  if (!pipeline::parseScheduleKind(word, kind))
    return parser.emitError(loc) << "unknown pipeline schedule '" << word << "'; expected "
                                 << pipeline::scheduleKindList();
  return kind;
}

//===----------------------------------------------------------------------===//
// ParallelAttr
//===----------------------------------------------------------------------===//

LogicalResult ParallelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   DictionaryAttr mesh, DictionaryAttr shard, bool, int64_t zero,
                                   pipeline::ScheduleKind, int64_t microbatches,
                                   int64_t virtualStages, ArrayAttr stageMap, RecomputeMode,
                                   ContextMode, int64_t bucketBytes, bool) {
  for (NamedAttribute axis : mesh) {
    if (!tessel::mesh::isMeshAxis(axis.getName().getValue()))
      return emitError() << "mesh axis '" << axis.getName().getValue() << "' is not one of "
                         << tessel::mesh::meshAxisList();
    auto size = dyn_cast<IntegerAttr>(axis.getValue());
    if (!size || size.getInt() < 1)
      return emitError() << "mesh axis '" << axis.getName().getValue()
                         << "' needs a size of 1 or more, not " << axis.getValue();
  }
  for (NamedAttribute rule : shard) {
    auto axes = dyn_cast<ArrayAttr>(rule.getValue());
    if (!axes)
      return emitError() << "dim '" << rule.getName().getValue()
                         << "' is mapped to a list of axes, not " << rule.getValue();
    for (Attribute a : axes) {
      auto axis = dyn_cast<StringAttr>(a);
      if (!axis || !tessel::mesh::isMeshAxis(axis.getValue()))
        return emitError() << "dim '" << rule.getName().getValue() << "' is mapped to " << a
                           << ", not one of " << tessel::mesh::meshAxisList();
    }
  }
  if (zero < 0 || zero > 3)
    return emitError() << "ZeRO stage " << zero << " is not 0, 1, 2 or 3";
  if (microbatches < 1 || virtualStages < 1)
    return emitError() << "needs 1 or more micro-batches and virtual stages";
  if (bucketBytes < 0)
    return emitError() << "gradient buckets of " << bucketBytes << " bytes";
  for (Attribute stage : stageMap) {
    auto layers = dyn_cast<ArrayAttr>(stage);
    if (!layers || !llvm::all_of(layers, [](Attribute l) {
          auto layer = dyn_cast<IntegerAttr>(l);
          return layer && layer.getInt() >= 0;
        }))
      return emitError() << "stage_map lists each stage's layers, not " << stage;
  }
  return success();
}

int64_t ParallelAttr::axisSize(StringRef axis) const {
  auto size = getMesh().getAs<IntegerAttr>(axis);
  return size ? size.getInt() : 1;
}

SmallVector<StringRef, 2> ParallelAttr::axesOf(StringRef dim) const {
  SmallVector<StringRef, 2> axes;
  if (auto list = getShard().getAs<ArrayAttr>(dim))
    for (Attribute a : list)
      axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

ParallelAttr ParallelAttr::withRule(StringRef dim, ArrayRef<StringRef> axes) const {
  MLIRContext *ctx = getContext();
  NamedAttrList rules(getShard());
  if (axes.empty()) {
    rules.erase(dim);
  } else {
    SmallVector<Attribute> names;
    for (StringRef axis : axes)
      names.push_back(StringAttr::get(ctx, axis));
    rules.set(dim, ArrayAttr::get(ctx, names));
  }
  return get(ctx, getMesh(), rules.getDictionary(ctx), getSequenceParallel(), getZero(),
             getSchedule(), getMicrobatches(), getVirtualStages(), getStageMap(), getRecompute(),
             getContextAttention(), getBucketBytes(), getOverlap());
}

//===----------------------------------------------------------------------===//
// The train section
//===----------------------------------------------------------------------===//

LogicalResult OptimizerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    OptimizerKind kind, APFloat lrValue, APFloat beta1Value,
                                    APFloat beta2Value, APFloat epsValue, APFloat decayValue,
                                    StringRef, APFloat momentumValue) {
  double lr = lrValue.convertToDouble(), beta1 = beta1Value.convertToDouble(),
         beta2 = beta2Value.convertToDouble(), eps = epsValue.convertToDouble(),
         weightDecay = decayValue.convertToDouble(), momentum = momentumValue.convertToDouble();
  if (!(lr >= 0) || !(eps >= 0) || !(weightDecay >= 0) || !(momentum >= 0 && momentum < 1))
    return emitError() << "needs lr, eps and weight_decay >= 0 and momentum in [0, 1)";
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return emitError() << "needs beta1 and beta2 in [0, 1)";
  // Adam without weight decay is AdamW without weight decay; with it, L2 regularisation
  // couples the decay to the moments, which no kernel implements.
  if (kind == OptimizerKind::Adam && weightDecay != 0.0)
    return emitError() << "optimizer 'adam' with weight decay (L2, coupled) is not supported "
                          "yet; use adamw, whose decay is decoupled";
  return success();
}

LogicalResult LearningRateAttr::verify(function_ref<InFlightDiagnostic()> emitError, LrSchedule,
                                       int64_t warmup, APFloat minLr) {
  if (warmup < 0 || !(minLr.convertToDouble() >= 0))
    return emitError() << "needs warmup >= 0 and min_lr >= 0";
  return success();
}

LogicalResult TrainAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t batch,
                                int64_t microBatch, int64_t accumulation, int64_t steps,
                                OptimizerAttr, LearningRateAttr, APFloat clipValue,
                                StringRef precision, StringRef, StringRef, int64_t,
                                int64_t evalEvery, int64_t evalBatches, APFloat fractionValue,
                                StringRef, int64_t checkpointEvery, StringRef, int64_t logEvery,
                                StringRef) {
  double clip = clipValue.convertToDouble(), evalFraction = fractionValue.convertToDouble();
  if (batch < 1 || microBatch < 1 || accumulation < 1 || steps < 1)
    return emitError() << "needs batch, micro_batch, accumulation and steps of 1 or more";
  if (!(clip >= 0))
    return emitError() << "needs clip >= 0 (0: no clipping)";
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    return emitError() << "precision '" << precision << "' is not fp32, bf16 or fp16";
  if (evalEvery < 0 || evalBatches < 0 || checkpointEvery < 0 || logEvery < 0)
    return emitError() << "needs eval_every, eval_batches, checkpoint_every and log_every >= 0";
  if (!(evalFraction >= 0 && evalFraction < 1))
    return emitError() << "needs eval_fraction in [0, 1)";
  return success();
}

//===----------------------------------------------------------------------===//
// PipelineAttr
//===----------------------------------------------------------------------===//

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   pipeline::ScheduleKind, int64_t stages, int64_t microbatches,
                                   int64_t virtualStages, APFloat bubble, int64_t inFlight,
                                   std::optional<APFloat>) {
  if (stages < 1 || microbatches < 1 || virtualStages < 1 || inFlight < 0 ||
      !(bubble.convertToDouble() >= 0))
    return emitError() << "needs stages, microbatches and virtual of 1 or more, and in_flight "
                          "and bubble >= 0";
  return success();
}

//===----------------------------------------------------------------------===//
// Accessors
//===----------------------------------------------------------------------===//

Attribute tessel::settings::defaultSettings(MLIRContext *context, StringRef mnemonic) {
  // The defaults are stated once, in SettingsAttrs.td; reading an empty attribute fills them.
  context->getOrLoadDialect<SettingsDialect>();
  Attribute settings = parseAttribute(("#tessel." + mnemonic + "<>").str(), context);
  assert(settings && "every settings field has a default");
  return settings;
}

ParallelAttr tessel::settings::parallelOf(ModuleOp module) {
  if (auto parallel = module->getAttrOfType<ParallelAttr>(kParallelName))
    return parallel;
  return defaultSettings<ParallelAttr>(module.getContext());
}

TrainAttr tessel::settings::trainOf(ModuleOp module) {
  if (auto train = module->getAttrOfType<TrainAttr>(kTrainName))
    return train;
  return defaultSettings<TrainAttr>(module.getContext());
}

PipelineAttr tessel::settings::pipelineOf(ModuleOp module) {
  return module->getAttrOfType<PipelineAttr>(kPipelineName);
}

int64_t tessel::settings::layerCount(ModuleOp module) {
  auto layers = module->getAttrOfType<IntegerAttr>(kLayersName);
  return layers ? layers.getInt() : 0;
}
