//===- Checkpoint.h - Saving and resuming training state --------*- C++ -*-===//
//
// A run directory holds one directory per checkpoint and a `latest` file naming the newest:
//
//   DIR/step_00000300/model.safetensors      parameters
//   DIR/step_00000300/optimizer.safetensors  optimizer state (moments, ...)
//   DIR/step_00000300/manifest.json          format, version, model, fingerprint, step, every
//                                            tensor's dtype, shape and checksum, caller-defined
//                                            "extra", and last the manifest's own checksum
//   DIR/latest                               "step_00000300\n"
//
// A checkpoint is written into DIR/.step_00000300.tmp-<pid>/ and renamed into place only when
// complete, then `latest` is replaced atomically, so a crash at any moment leaves `latest`
// naming a complete checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CHECKPOINT_H
#define TESSEL_RUNTIME_CHECKPOINT_H

#include "runtime/Json.h"
#include "runtime/Safetensors.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

/// What a checkpoint holds; the tensors are borrowed for the duration of saveCheckpoint.
struct CheckpointContents {
  /// The model's name, checked on resume.
  std::string model;
  /// Identifies the compiled plan (caller-defined), recorded for diagnostics.
  std::string fingerprint;
  int64_t step = 0;
  /// Caller-defined: optimizer hyper-parameters, data position, RNG state, ...
  Json extra;
  std::vector<TensorView> params;
  std::vector<TensorView> optimizerState;
};

/// A checkpoint read back and validated.
struct LoadedCheckpoint {
  /// The checkpoint directory (DIR/step_XXXXXXXX).
  std::string path;
  std::string model;
  std::string fingerprint;
  int64_t step = 0;
  Json extra;
  /// Tensor names in the order they were saved (the manifest's order).
  std::vector<std::string> paramNames;
  std::vector<std::string> optimizerNames;
  std::unique_ptr<SafetensorsFile> params;
  std::unique_ptr<SafetensorsFile> optimizer;
};

/// "step_00000300".
std::string checkpointName(int64_t step);

/// The checksum a manifest carries in its last member, "checksum": FNV-1a 64, in hex, of its
/// compact JSON text without that member.
std::string manifestChecksum(const Json &manifest);

/// Saves `contents` as DIR/step_XXXXXXXX (creating `dir` if needed) and points DIR/latest at
/// it. A checkpoint of the same step is replaced. On failure the temporary directory is
/// removed, earlier checkpoints and `latest` are untouched, and `error` says why.
bool saveCheckpoint(const std::string &dir, const CheckpointContents &contents, std::string &error);

/// Loads a checkpoint directory, or the one a run directory's `latest` names. Validates the
/// manifest (format "tessel-checkpoint", version 2, its checksum, every field with its type, a
/// step equal to the one its directory's name gives) and both
/// safetensors files, which must hold exactly the tensors the manifest lists, with its dtypes
/// and shapes.
std::unique_ptr<LoadedCheckpoint> loadCheckpoint(const std::string &pathOrDir, std::string &error);

/// Checks that `checkpoint` can initialise model `modelName` whose parameters are
/// `modelParams` (name, shape). On a mismatch `error` names it: a different model, or one line
/// per parameter that differs in shape, is missing, or is extra.
bool checkCompatible(const LoadedCheckpoint &checkpoint,
                     const std::vector<std::pair<std::string, std::vector<int64_t>>> &modelParams,
                     const std::string &modelName, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CHECKPOINT_H
