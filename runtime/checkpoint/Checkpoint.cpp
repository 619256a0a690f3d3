//===- Checkpoint.cpp - Saving training state -----------------------------===//
//
// The saving half of Checkpoint.h: each step of a save (beginCheckpoint, writeShard,
// commitCheckpoint) and saveCheckpoint, which takes them all in one process. A manifest is
// made only of shards that loading accepts: blocks inside their tensors, not overlapping,
// covering each tensor, and none of a tensor the checkpoint does not list. Loading is
// CheckpointLoad.cpp's.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "common/support/Checksum.h"
#include "runtime/checkpoint/CheckpointImpl.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace tessel::rt {

namespace fs = std::filesystem;
using namespace detail; // The format's names (CheckpointImpl.h).

std::string checkpointName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

/// "model-00002.safetensors": the file of rank 2's parameter blocks.
static std::string shardFile(const char *kind, uint32_t rank) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-%05u.safetensors", kind, rank);
  return name;
}

static Json shapeJson(const std::vector<int64_t> &shape) {
  Json list = Json::array();
  for (int64_t dim : shape)
    list.push(dim);
  return list;
}

std::string manifestChecksum(const Json &manifest, int64_t version) {
  Json body = Json::object();
  for (const auto &[key, value] : manifest.members())
    if (key != "checksum")
      body.set(key, value);
  std::string text = body.compact();
  return hex64(version >= 4 ? xxh3_64(text.data(), text.size())
                            : fnv1a64(text.data(), text.size()));
}

std::string checkpointTempDir(const std::string &dir, int64_t step, const std::string &token) {
  return trimSlashes(dir) + "/." + checkpointName(step) + ".tmp-" + token;
}

bool beginCheckpoint(const std::string &dirArg, int64_t step, const std::string &token,
                     std::string &error) {
  std::string dir = trimSlashes(dirArg);
  if (step < 0) {
    error = "cannot save a checkpoint for negative step " + std::to_string(step);
    return false;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error = "cannot create checkpoint directory " + dir + ": " + ec.message();
    return false;
  }
  // What interrupted writes left here (a crash, a kill) is garbage; it goes before more is added.
  removeStaleTemporaries(dir);
  std::string tempDir = checkpointTempDir(dir, step, token);
  // A leftover of an earlier process with our token (containers reuse pids) is garbage.
  fs::remove_all(tempDir, ec);
  if (!fs::create_directory(tempDir, ec)) {
    error = "cannot create " + tempDir + ": " + (ec ? ec.message() : "it exists");
    return false;
  }
  return true;
}

bool writeShard(const std::string &tempDir, const CheckpointShard &shard, Json &description,
                std::string &error) {
  description = Json::object();
  for (const auto &[kind, blocks] :
       {std::pair<const char *, const std::vector<TensorBlock> *>{"params", &shard.params},
        {"optimizer", &shard.optimizerState}}) {
    Json list = Json::object();
    if (blocks->empty()) {
      description.set(kind, std::move(list));
      continue;
    }
    const std::string file = shardFile(std::string(kind) == "params" ? "model" : "optimizer",
                                       shard.rank);
    std::vector<TensorView> views;
    for (const TensorBlock &b : *blocks)
      views.push_back({b.name, b.dtype, b.shape, b.data});
    // Written before the checksums: writing refuses a block without data or with an invalid
    // shape, whose bytes could not be read.
    if (!writeSafetensors(tempDir + "/" + file, views, {{"format", kFormat}}, error))
      return false;
    for (const TensorBlock &b : *blocks) {
      Json entry = Json::object();
      entry.set("file", file);
      entry.set("offset", shapeJson(b.offset));
      entry.set("shape", shapeJson(b.shape));
      const int64_t bytes = shapeElements(b.shape) * dtypeSize(b.dtype);
      Json chunks = Json::array();
      for (int64_t at = 0; at < bytes; at += kChecksumChunk)
        chunks.push(shardChecksum(static_cast<const uint8_t *>(b.data) + at,
                                  static_cast<size_t>(std::min(kChecksumChunk, bytes - at)),
                                  /*fnv=*/false));
      entry.set("xxh3_chunks", std::move(chunks));
      list.set(b.name, std::move(entry));
    }
    description.set(kind, std::move(list));
  }
  return true;
}

/// The manifest's entry for each tensor of `tensors`: its dtype, whole shape and the shards of
/// `kind` in `shards` that hold it, which must lie inside it, not overlap and cover it; and
/// no shard may hold a tensor that `tensors` lacks. What loading would refuse is never committed.
static bool describeTensors(const std::vector<CheckpointTensor> &tensors, const char *kind,
                            const std::vector<Json> &shards, Json &out, std::string &error) {
  out = Json::object();
  for (const CheckpointTensor &tensor : tensors) {
    Json entry = Json::object();
    entry.set("dtype", dtypeName(tensor.dtype));
    entry.set("shape", shapeJson(tensor.shape));
    Json list = Json::array();
    int64_t covered = 0;
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> placed;
    for (const Json &shard : shards) {
      const Json *blocks = shard.find(kind);
      const Json *block = blocks ? blocks->find(tensor.name) : nullptr;
      if (!block)
        continue;
      std::vector<int64_t> offset, shape;
      for (const Json &dim : block->find("offset")->items())
        offset.push_back(dim.asInt());
      for (const Json &dim : block->find("shape")->items())
        shape.push_back(dim.asInt());
      std::string why;
      bool fits = offset.size() == tensor.shape.size() && shape.size() == tensor.shape.size();
      for (size_t d = 0; fits && d < shape.size(); ++d)
        fits = offset[d] >= 0 && offset[d] + shape[d] <= tensor.shape[d];
      if (!fits)
        why = "does not fit in the tensor's shape " + formatShape(tensor.shape);
      for (size_t i = 0; why.empty() && i < placed.size(); ++i)
        if (blocksOverlap(offset, shape, placed[i].first, placed[i].second))
          why = "overlaps another block of it";
      if (!why.empty()) {
        error = "the block of '" + tensor.name + "' in " + block->find("file")->asString() +
                " at " + formatShape(offset) + " of shape " + formatShape(shape) + " " + why;
        return false;
      }
      covered += shapeElements(shape);
      placed.emplace_back(std::move(offset), std::move(shape));
      list.push(*block);
    }
    if (covered != shapeElements(tensor.shape)) {
      error = "the ranks' shards of '" + tensor.name + "' hold " + std::to_string(covered) +
              " of its " + std::to_string(shapeElements(tensor.shape)) + " elements";
      return false;
    }
    entry.set("shards", std::move(list));
    out.set(tensor.name, std::move(entry));
  }
  // A block the manifest does not list would make its whole file unreadable.
  for (const Json &shard : shards)
    if (const Json *blocks = shard.find(kind))
      for (const auto &[name, block] : blocks->members())
        if (!out.find(name)) {
          error = "the ranks wrote '" + name + "' into " + block.find("file")->asString() +
                  ", which is not among the checkpoint's " +
                  (std::string(kind) == "params" ? "parameters" : "optimizer state");
          return false;
        }
  return true;
}

void abandonCheckpoint(const std::string &tempDir) {
  std::error_code ec;
  fs::remove_all(tempDir, ec);
}

bool commitCheckpoint(const std::string &dirArg, const std::string &tempDir,
                      const CheckpointContents &contents, const std::vector<Json> &shards,
                      std::string &error) {
  std::string dir = trimSlashes(dirArg);
  std::string name = checkpointName(contents.step);
  std::string finalDir = dir + "/" + name;
  Json manifest = Json::object();
  manifest.set("format", kFormat);
  manifest.set("version", kVersion);
  manifest.set("model", contents.model);
  manifest.set("fingerprint", contents.fingerprint);
  manifest.set("step", contents.step);
  Json params, optimizer;
  bool ok = describeTensors(contents.params, "params", shards, params, error) &&
            describeTensors(contents.optimizerState, "optimizer", shards, optimizer, error);
  if (ok) {
    manifest.set("params", std::move(params));
    manifest.set("optimizer", std::move(optimizer));
    manifest.set("extra", contents.extra);
    // Last, over everything before it: an edited or damaged manifest is refused like a tensor.
    manifest.set("checksum", manifestChecksum(manifest, kVersion));
    // Written last, after every shard: a manifest names only durable files.
    ok = fsyncDirectory(tempDir, error) &&
         writeFileAtomically(tempDir + "/" + kManifestFile, manifest.pretty() + "\n", error) &&
         fsyncDirectory(tempDir, error) && replaceDirectoryAtomically(tempDir, finalDir, error);
  }
  if (!ok) {
    abandonCheckpoint(tempDir);
    error = "cannot save checkpoint " + finalDir + ": " + error;
    return false;
  }
  // The checkpoint is complete on disk; only now may `latest` name it.
  if (!writeFileAtomically(dir + "/" + kLatestFile, name + "\n", error)) {
    error = "checkpoint " + finalDir + " was saved but " + dir + "/latest not updated: " + error;
    return false;
  }
  return true;
}

bool saveCheckpoint(const std::string &dir, const CheckpointContents &contents,
                    const std::vector<CheckpointShard> &shards, std::string &error) {
  const std::string token = tempSuffix().substr(5); // The pid, without ".tmp-".
  if (!beginCheckpoint(dir, contents.step, token, error))
    return false;
  const std::string tempDir = checkpointTempDir(dir, contents.step, token);
  std::vector<Json> described(shards.size());
  for (size_t i = 0; i < shards.size(); ++i)
    if (!writeShard(tempDir, shards[i], described[i], error)) {
      abandonCheckpoint(tempDir);
      error = "cannot save checkpoint " + trimSlashes(dir) + "/" + checkpointName(contents.step) +
              ": " + error;
      return false;
    }
  return commitCheckpoint(dir, tempDir, contents, described, error);
}

} // namespace tessel::rt
