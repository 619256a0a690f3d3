//===- SettingsDialect.h - The module's settings ----------------*- C++ -*-===//
//
// The attributes that carry the spec's `parallel` and `train` sections, and the pipeline
// schedule's figures, from the front end to the plan writer; and their one accessor each.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_SETTINGS_IR_SETTINGSDIALECT_H
#define TESSEL_DIALECT_SETTINGS_IR_SETTINGSDIALECT_H

#include "common/schedule/ScheduleKind.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include <optional>

#include "tessel/Dialect/Settings/IR/SettingsDialect.h.inc"
#include "tessel/Dialect/Settings/IR/SettingsEnums.h.inc"

namespace tessel::settings {

// Field parsers of the settings' parameters (SettingsAttrs.td).
mlir::FailureOr<llvm::APFloat> parseF64(mlir::AsmParser &parser);
mlir::FailureOr<std::optional<llvm::APFloat>> parseOptionalF64(mlir::AsmParser &parser);
mlir::FailureOr<bool> parseBool(mlir::AsmParser &parser);
mlir::FailureOr<pipeline::ScheduleKind> parseScheduleKind(mlir::AsmParser &parser);

/// A settings attribute with every field at its default (as `#tessel.name<>` reads).
mlir::Attribute defaultSettings(mlir::MLIRContext *context, llvm::StringRef mnemonic);
template <typename AttrT> AttrT defaultSettings(mlir::MLIRContext *context) {
  return llvm::cast<AttrT>(defaultSettings(context, AttrT::getMnemonic()));
}
} // namespace tessel::settings

#define GET_ATTRDEF_CLASSES
#include "tessel/Dialect/Settings/IR/SettingsAttrs.h.inc"

namespace tessel::settings {

/// The module attributes the settings are held in.
constexpr llvm::StringLiteral kParallelName = "tessel.parallel";
constexpr llvm::StringLiteral kTrainName = "tessel.train";
constexpr llvm::StringLiteral kPipelineName = "tessel.pipeline";
constexpr llvm::StringLiteral kDimsName = "tessel.dims";
constexpr llvm::StringLiteral kLayersName = "tessel.layers";

/// The module's parallel settings; the defaults (one rank) where it has none.
ParallelAttr parallelOf(mlir::ModuleOp module);
/// The module's training settings; the defaults where it has none.
TrainAttr trainOf(mlir::ModuleOp module);
/// The module's pipeline figures, or null where no pipeline was scheduled.
PipelineAttr pipelineOf(mlir::ModuleOp module);
/// The module's repeated layer count (`tessel.layers`), 0 where it has none.
int64_t layerCount(mlir::ModuleOp module);

} // namespace tessel::settings

#endif // TESSEL_DIALECT_SETTINGS_IR_SETTINGSDIALECT_H
