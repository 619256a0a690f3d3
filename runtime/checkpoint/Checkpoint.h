//===- Checkpoint.h - Saving and resuming training state --------*- C++ -*-===//
//
// A run directory holds one directory per checkpoint and a `latest` file naming the newest:
//
//   DIR/step_00000300/model-00002.safetensors      rank 2's blocks of the parameters
//   DIR/step_00000300/optimizer-00002.safetensors  rank 2's blocks of the optimizer state
//   DIR/step_00000300/manifest.json                format, version, model, fingerprint, step,
//                                                  every tensor's dtype and whole shape with its
//                                                  shards (file, offset, shape, checksum),
//                                                  caller-defined "extra", and last the
//                                                  manifest's own checksum
//   DIR/latest                                     "step_00000300\n"
//
// Checkpoints are sharded: each rank writes only the blocks it speaks for, under the tensors'
// global names, so no rank ever holds the whole model. Loading reshards: a rank reads the part
// of each shard that overlaps its own block, so a checkpoint saved under one layout, rank count
// or process count resumes under any other.
//
// Saving takes three steps, so that ranks in several processes can share it: the first
// process makes DIR/.step_00000300.tmp-<token>/ (beginCheckpoint), every rank writes its shard
// files into it (writeShard), and when every shard is durable the first process writes the
// manifest and renames the directory into place (commitCheckpoint), then `latest` is replaced
// atomically; so a crash at any moment leaves `latest` naming a complete checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define TESSEL_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "runtime/support/Json.h"
#include "runtime/checkpoint/Safetensors.h"

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::rt {

/// A tensor of the checkpoint as a whole.
struct CheckpointTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

/// What a checkpoint holds besides the tensors' values.
struct CheckpointContents {
  /// The model's name, checked on resume.
  std::string model;
  /// Identifies the compiled plan (caller-defined), recorded for diagnostics.
  std::string fingerprint;
  int64_t step = 0;
  /// Caller-defined: optimizer hyper-parameters, data position, RNG state, ...
  Json extra;
  /// Every tensor, in the order the manifest lists them.
  std::vector<CheckpointTensor> params, optimizerState;
};

/// One block of a tensor, borrowed: where it starts in the whole tensor and its shape.
struct TensorBlock {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> offset, shape;
  const void *data = nullptr;
};

/// What one rank writes: its blocks of the parameters and of the optimizer state.
struct CheckpointShard {
  uint32_t rank = 0;
  std::vector<TensorBlock> params, optimizerState;
};

/// A shard of a stored tensor: the file holding it, where it starts, its shape, its checksum.
struct StoredShard {
  std::string file;
  std::vector<int64_t> offset, shape;
  /// Version 5: XXH3 64, in hex, of each kChecksumChunk bytes of the shard's data in turn, so
  /// that a load checks only the pieces it reads. Versions 3 and 4: one checksum of all of it
  /// (FNV-1a 64 in version 3).
  std::vector<std::string> checksums;
  bool fnv = false; ///< The checksum is FNV-1a's (a version 3 manifest).
  /// The bytes each of `checksums` covers: kChecksumChunk, or all of them in one.
  int64_t chunkBytes = std::numeric_limits<int64_t>::max();
  /// Which of `checksums` a read has checked, set as reads touch them.
  mutable std::vector<bool> checked;
};

/// The bytes each chunk checksum of a version 5 shard covers (the last covers the rest).
constexpr int64_t kChecksumChunk = int64_t(1) << 20;

struct StoredTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; ///< The whole tensor's.
  std::vector<StoredShard> shards;
};

/// A checkpoint whose manifest was read and validated. Shard files are read when a block
/// needs them, and each is checked (its tensors' dtypes, shapes and checksums) then.
class LoadedCheckpoint {
public:
  /// The checkpoint directory (DIR/step_XXXXXXXX).
  std::string path;
  std::string model;
  std::string fingerprint;
  int64_t step = 0;
  Json extra;
  /// Tensor names in the order they were saved (the manifest's order).
  std::vector<std::string> paramNames;
  std::vector<std::string> optimizerNames;
  std::map<std::string, StoredTensor> params, optimizer;

  /// The stored parameter or optimizer tensor `name`, or null.
  const StoredTensor *find(const std::string &name) const;
  /// Reads the block of tensor `name` that starts at `offset` with shape `shape` into `out`,
  /// from every shard it overlaps, as elements of the tensor's dtype, except that a BF16 or
  /// F16 tensor is read widened to F32 (as the model's state takes it). Only the bytes of the
  /// block are read from each shard file, which is mapped, and only the checksums that cover
  /// them are checked (version 5; before, the whole shard's on its first read). Fails, naming
  /// the file, when a shard file is missing or corrupt.
  bool readBlock(const std::string &name, const std::vector<int64_t> &offset,
                 const std::vector<int64_t> &shape, void *out, std::string &error) const;
  /// The bytes of shard data checked against their checksums so far: what the reads touched.
  uint64_t bytesChecked() const { return bytesChecked_; }

private:
  const SafetensorsFile *open(const std::string &file, std::string &error) const;
  /// Checks the checksums of `shard` (of `name`, whose data is `bytes`) that cover bytes
  /// [begin, end) and were not checked yet.
  bool check(const std::string &name, const StoredShard &shard, const ByteSpan &bytes,
             int64_t begin, int64_t end, std::string &error) const;
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  mutable uint64_t bytesChecked_ = 0;
};

/// "step_00000300".
std::string checkpointName(int64_t step);

/// The checksum a manifest of `version` carries in its last member, "checksum": XXH3 64 (FNV-1a
/// 64 in version 3), in hex, of its compact JSON text without that member.
std::string manifestChecksum(const Json &manifest, int64_t version);

/// Step 1, on one process: creates `dir` if needed, sweeps what interrupted saves left there,
/// and makes the temporary directory DIR/.step_XXXXXXXX.tmp-<token> that the shards go into.
/// `token` names this save among others (the first process's pid).
bool beginCheckpoint(const std::string &dir, int64_t step, const std::string &token,
                     std::string &error);
/// Where beginCheckpoint puts the shards of `step`.
std::string checkpointTempDir(const std::string &dir, int64_t step, const std::string &token);

/// Step 2, on every rank that holds blocks: writes `shard` into `tempDir` and returns in
/// `description` what the manifest says of it.
bool writeShard(const std::string &tempDir, const CheckpointShard &shard, Json &description,
                std::string &error);

/// On one process, once every rank has stopped writing into it: removes the temporary directory
/// of a save that failed (a shard that could not be written: a full disk), so that it does not
/// keep the disk full.
void abandonCheckpoint(const std::string &tempDir);

/// Step 3, on one process, once every shard is written: checks that the shards make up every
/// tensor of `contents`, writes the manifest, moves the checkpoint into place as
/// DIR/step_XXXXXXXX (replacing one of the same step) and points DIR/latest at it. On failure
/// the temporary directory is removed and earlier checkpoints and `latest` are untouched.
bool commitCheckpoint(const std::string &dir, const std::string &tempDir,
                      const CheckpointContents &contents, const std::vector<Json> &shards,
                      std::string &error);

/// The three steps in one process: every shard written by the caller's ranks.
bool saveCheckpoint(const std::string &dir, const CheckpointContents &contents,
                    const std::vector<CheckpointShard> &shards, std::string &error);

/// Loads a checkpoint directory, or the one a run directory's `latest` names. Validates the
/// manifest (format "tessel-checkpoint", version 5 (or 4 or 3), its checksum, every field with its type, a
/// step equal to the one its directory's name gives, and shards that lie inside their tensor
/// and together cover it).
std::unique_ptr<LoadedCheckpoint> loadCheckpoint(const std::string &pathOrDir, std::string &error);

/// Checks that `checkpoint` can initialise model `modelName` whose parameters are
/// `modelParams` (name, shape). On a mismatch `error` names it: a different model, or one line
/// per parameter that differs in shape, is missing, or is extra.
bool checkCompatible(const LoadedCheckpoint &checkpoint,
                     const std::vector<std::pair<std::string, std::vector<int64_t>>> &modelParams,
                     const std::string &modelName, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CHECKPOINT_CHECKPOINT_H
