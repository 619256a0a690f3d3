//===- TrainSettings.h - The module's training settings ---------*- C++ -*-===//
//
// The front end records the spec's `train` section as the module attribute `tessel.train`;
// passes and the plan writer read it back through this one accessor.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_IR_TRAINSETTINGS_H
#define TESSEL_DIALECT_GRAPH_IR_TRAINSETTINGS_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>

namespace tessel {

struct TrainSettings {
  int64_t batch = 1, microBatch = 1, accumulation = 1, steps = 1;
  std::string optimizer = "adamw";
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0, momentum = 0.0;
  /// The parameter classes weight decay applies to, comma-separated (ParameterClasses.h).
  std::string decay = "weights,embeddings";
  std::string schedule = "constant";
  int64_t warmup = 0;
  double minLr = 0.0;
  double clip = 0.0;
  std::string data, tokenizer = "byte";
  std::string precision = "fp32"; ///< fp32, bf16 or fp16 (-tessel-mixed-precision).
  int64_t seed = 0;
  int64_t evalEvery = 0, evalBatches = 0;
  double evalFraction = 0.0;
  int64_t checkpointEvery = 0;
  std::string checkpointDir;
  int64_t logEvery = 1;
};

/// Reads `tessel.train` from `module`; fields it lacks keep their defaults.
TrainSettings readTrainSettings(mlir::ModuleOp module);

/// The size of dim `name` from `tessel.dims`, or -1.
int64_t readDimSize(mlir::ModuleOp module, llvm::StringRef name);

} // namespace tessel

#endif // TESSEL_DIALECT_GRAPH_IR_TRAINSETTINGS_H
