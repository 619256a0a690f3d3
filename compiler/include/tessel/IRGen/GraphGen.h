//===- GraphGen.h - From the analysed program to graph IR -------*- C++ -*-===//
#ifndef TESSEL_IRGEN_GRAPHGEN_H
#define TESSEL_IRGEN_GRAPHGEN_H

#include "tessel/Frontend/Program.h"
#include "tessel/Frontend/Source.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace tessel {

/// Emits `program` as a module holding `func.func @forward` in the graph dialect, with the
/// model's dims and its parallel and training settings as module attributes. Every op carries
/// the location of the spec text it came from, nested in call-site locations for blocks. Null
/// (after a diagnostic) when the settings refuse a value the front end accepted.
mlir::OwningOpRef<mlir::ModuleOp> emitGraphModule(mlir::MLIRContext &context,
                                                  const Program &program,
                                                  const SourceManager &sources);

/// Loads the dialects the emitted module uses.
void loadGraphDialects(mlir::MLIRContext &context);

} // namespace tessel

#endif // TESSEL_IRGEN_GRAPHGEN_H
