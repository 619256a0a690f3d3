//===- CheckpointLoad.cpp - Resuming training state -----------------------===//
//
// A checkpoint found (a checkpoint directory, or the one a run directory's `latest` names),
// its manifest read and checked whole before anything else is believed: its checksum, its
// step against its directory's name, and every tensor's shards (inside the tensor, not
// overlapping, covering it). The shards' files are opened only when a block is read, each
// checked against the manifest; a block's bytes are checked chunk by chunk as they are read,
// so loading a slice checks only that slice.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"

#include "runtime/checkpoint/CheckpointImpl.h"
#include "runtime/support/AtomicFile.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace tessel::rt {

namespace fs = std::filesystem;
using namespace detail; // The format's names (CheckpointImpl.h).

/// The largest `latest` (one directory name) and manifest read: anything larger is not one.
static constexpr uint64_t kMaxLatestBytes = 4096;
static constexpr uint64_t kMaxManifestBytes = uint64_t(256) << 20;

/// The step a checkpoint directory's name gives ("step_00000300" is 300), or -1.
static int64_t stepOfName(const std::string &dir) {
  std::string name = dir.substr(dir.find_last_of('/') + 1);
  if (name.size() != 13 || name.compare(0, 5, "step_") != 0)
    return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

namespace {

class Loader {
public:
  std::unique_ptr<LoadedCheckpoint> load(const std::string &pathOrDir, std::string &error) {
    auto checkpoint = loadImpl(trimSlashes(pathOrDir));
    if (!checkpoint)
      error = error_;
    return checkpoint;
  }

private:
  std::nullptr_t fail(const std::string &why) {
    error_ = why;
    return nullptr;
  }

  bool reject(const std::string &why) {
    error_ = why;
    return false;
  }

  /// Rejects the manifest for `why`.
  bool refuse(const std::string &why) {
    error_ = manifestPath_ + ": " + why;
    return false;
  }

  /// Finds the checkpoint directory: `path` itself, or what its `latest` file names.
  bool resolve(const std::string &path, std::string &checkpointDir) {
    std::error_code ec;
    fs::file_status status = fs::status(path, ec);
    if (!fs::exists(status))
      return reject("checkpoint " + path + " does not exist");
    if (!fs::is_directory(status))
      return reject("checkpoint " + path +
                    " is not a directory (give a checkpoint directory or a run directory)");
    if (fs::exists(path + "/" + kManifestFile, ec)) {
      checkpointDir = path;
      return true;
    }
    std::string latestPath = path + "/" + kLatestFile;
    if (!fs::exists(latestPath, ec))
      return reject(path + " is neither a checkpoint (no " + kManifestFile +
                    ") nor a run directory (no 'latest' file)");
    std::string latest;
    if (!readWholeFile(latestPath, kMaxLatestBytes, latest, error_))
      return false;
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r' ||
                               latest.back() == ' ' || latest.back() == '\t'))
      latest.pop_back();
    if (latest.empty() || latest.find('/') != std::string::npos || latest == "." || latest == "..")
      return reject(latestPath + " does not hold a checkpoint directory name");
    checkpointDir = path + "/" + latest;
    if (!fs::is_directory(checkpointDir, ec))
      return reject(latestPath + " names " + latest + ", which does not exist");
    return true;
  }

  /// Reads a list of dims: non-negative integers.
  bool readDims(const Json *json, const std::string &where, const char *what,
                std::vector<int64_t> &dims) {
    if (!json || !json->isArray())
      return refuse(where + " lacks its array '" + what + "'");
    for (const Json &dim : json->items()) {
      if (!dim.isInteger() || dim.asInt() < 0)
        return refuse(where + " has a '" + what + "' that is not a list of non-negative integers");
      dims.push_back(dim.asInt());
    }
    return true;
  }

  bool readTensorList(const Json &manifest, const char *field,
                      std::map<std::string, StoredTensor> &tensors,
                      std::vector<std::string> &names) {
    const Json *list = manifest.find(field);
    if (!list)
      return refuse(std::string("lacks '") + field + "'");
    if (!list->isObject())
      return refuse(std::string("'") + field + "' is not an object of tensors");
    for (const auto &[name, entry] : list->members()) {
      std::string where = std::string("'") + field + "' tensor '" + name + "'";
      const Json *dtypeJson = entry.find("dtype");
      if (!entry.isObject() || !dtypeJson || !dtypeJson->isString())
        return refuse(where + " needs a string 'dtype'");
      std::optional<DType> dtype = parseDType(dtypeJson->asString());
      if (!dtype)
        return refuse(where + " has unknown dtype '" + dtypeJson->asString() + "'");
      StoredTensor tensor;
      tensor.dtype = *dtype;
      if (!readDims(entry.find("shape"), where, "shape", tensor.shape))
        return false;
      const Json *shards = entry.find("shards");
      if (!shards || !shards->isArray())
        return refuse(where + " lacks its array 'shards'");
      int64_t covered = 0;
      for (const Json &shard : shards->items()) {
        StoredShard s;
        const Json *file = shard.find("file");
        s.fnv = version_ < 4;
        const char *checksumKey = s.fnv ? "fnv1a64" : version_ < 5 ? "xxh3" : "xxh3_chunks";
        const Json *checksum = shard.find(checksumKey);
        const bool chunked = version_ >= 5;
        if (!shard.isObject() || !file || !file->isString() || !checksum ||
            !(chunked ? checksum->isArray() : checksum->isString()))
          return refuse(where + " has a shard without a string 'file' and " +
                        (chunked ? "an array '" : "a string '") + checksumKey + "'");
        s.file = file->asString();
        if (chunked) {
          for (const Json &c : checksum->items()) {
            if (!c.isString())
              return refuse(where + " has a shard whose '" + checksumKey +
                            "' holds something other than strings");
            s.checksums.push_back(c.asString());
          }
        } else {
          s.checksums.push_back(checksum->asString());
        }
        if (s.file.empty() || s.file.find('/') != std::string::npos || s.file[0] == '.')
          return refuse(where + " has a shard in '" + s.file +
                        "', which is not a file of the checkpoint directory");
        if (!readDims(shard.find("offset"), where, "offset", s.offset) ||
            !readDims(shard.find("shape"), where, "shape", s.shape))
          return false;
        if (s.offset.size() != tensor.shape.size() || s.shape.size() != tensor.shape.size())
          return refuse(where + " has a shard of another rank than the tensor's");
        if (chunked) {
          const int64_t bytes = shapeElements(s.shape) * dtypeSize(tensor.dtype);
          const int64_t chunks = (bytes + kChecksumChunk - 1) / kChecksumChunk;
          if (static_cast<int64_t>(s.checksums.size()) != chunks)
            return refuse(where + " has a shard of " + std::to_string(bytes) + " bytes with " +
                          std::to_string(s.checksums.size()) + " chunk checksums, not " +
                          std::to_string(chunks));
        }
        s.checked.assign(s.checksums.size(), false);
        if (chunked)
          s.chunkBytes = kChecksumChunk;
        for (size_t d = 0; d < s.shape.size(); ++d)
          if (s.offset[d] + s.shape[d] > tensor.shape[d])
            return refuse(where + " has a shard that lies outside the tensor");
        for (const StoredShard &other : tensor.shards)
          if (blocksOverlap(s.offset, s.shape, other.offset, other.shape))
            return refuse(where + " has shards that overlap");
        covered += shapeElements(s.shape);
        tensor.shards.push_back(std::move(s));
      }
      if (covered != shapeElements(tensor.shape))
        return refuse(where + "'s shards hold " + std::to_string(covered) + " of its " +
                      std::to_string(shapeElements(tensor.shape)) + " elements");
      tensors[name] = std::move(tensor);
      names.push_back(name);
    }
    return true;
  }

  std::unique_ptr<LoadedCheckpoint> loadImpl(const std::string &path) {
    auto checkpoint = std::make_unique<LoadedCheckpoint>();
    if (!resolve(path, checkpoint->path))
      return nullptr;
    manifestPath_ = checkpoint->path + "/" + kManifestFile;
    std::optional<Json> manifest = readJsonFile(manifestPath_, kMaxManifestBytes, error_);
    if (!manifest)
      return nullptr;
    if (!manifest->isObject())
      return fail(manifestPath_ + ": " + "is not a JSON object");
    const Json *format = manifest->find("format");
    if (!format || !format->isString() || format->asString() != kFormat)
      return fail(manifestPath_ + ": " +
                  std::string("is not a Tessel checkpoint manifest (its 'format' is not '") +
                  kFormat + "')");
    const Json *version = manifest->find("version");
    if (!version || !version->isInteger())
      return fail(manifestPath_ + ": " + "lacks an integer 'version'");
    if (version->asInt() < kOldestVersion || version->asInt() > kVersion)
      return refuse("has version " + std::to_string(version->asInt()) +
                    "; this build reads versions " + std::to_string(kOldestVersion) + " to " +
                    std::to_string(kVersion)),
             nullptr;
    version_ = version->asInt();
    const Json *checksum = manifest->find("checksum");
    if (!checksum || !checksum->isString())
      return fail(manifestPath_ + ": lacks its string 'checksum'");
    if (checksum->asString() != manifestChecksum(*manifest, version_))
      return fail(manifestPath_ + ": does not match its checksum (it was edited or is corrupt)");
    for (const char *field : {"model", "fingerprint"}) {
      const Json *value = manifest->find(field);
      if (!value || !value->isString())
        return fail(manifestPath_ + ": " + std::string("lacks a string '") + field + "'");
    }
    checkpoint->model = manifest->find("model")->asString();
    checkpoint->fingerprint = manifest->find("fingerprint")->asString();
    const Json *step = manifest->find("step");
    if (!step || !step->isInteger() || step->asInt() < 0)
      return fail(manifestPath_ + ": " + "lacks a non-negative integer 'step'");
    checkpoint->step = step->asInt();
    if (int64_t named = stepOfName(checkpoint->path); named >= 0 && named != checkpoint->step)
      return fail(manifestPath_ + ": says step " + std::to_string(checkpoint->step) +
                  " but its directory is that of step " + std::to_string(named));
    const Json *extra = manifest->find("extra");
    if (!extra)
      return fail(manifestPath_ + ": " + "lacks 'extra'");
    checkpoint->extra = *extra;

    if (!readTensorList(*manifest, "params", checkpoint->params, checkpoint->paramNames) ||
        !readTensorList(*manifest, "optimizer", checkpoint->optimizer, checkpoint->optimizerNames))
      return nullptr;
    return checkpoint;
  }

  std::string manifestPath_;
  int64_t version_ = 0; ///< The manifest's format version.
  std::string error_;
};

} // namespace

const StoredTensor *LoadedCheckpoint::find(const std::string &name) const {
  auto it = params.find(name);
  if (it != params.end())
    return &it->second;
  it = optimizer.find(name);
  return it == optimizer.end() ? nullptr : &it->second;
}

const SafetensorsFile *LoadedCheckpoint::open(const std::string &file, std::string &error) const {
  auto it = files_.find(file);
  if (it != files_.end())
    return it->second.get();
  const std::string filePath = path + "/" + file;
  auto contents = readSafetensors(filePath, error);
  if (!contents)
    return nullptr;
  // Every tensor the file holds must be a shard the manifest lists there, matching its entry.
  std::set<std::string> listed;
  for (const auto *tensors : {&params, &optimizer})
    for (const auto &[name, tensor] : *tensors)
      for (const StoredShard &shard : tensor.shards) {
        if (shard.file != file)
          continue;
        listed.insert(name);
        const SafetensorsTensor *found = contents->find(name);
        if (!found) {
          error = filePath + " lacks tensor '" + name + "' that " + kManifestFile + " lists";
          return nullptr;
        }
        if (found->dtype != tensor.dtype || found->shape != shard.shape) {
          error = "the shard of '" + name + "' is " + dtypeName(tensor.dtype) + " " +
                  formatShape(shard.shape) + " in " + kManifestFile + " but " +
                  dtypeName(found->dtype) + " " + formatShape(found->shape) + " in " + filePath;
          return nullptr;
        }
      }
  for (const auto &entry : contents->tensors)
    if (!listed.count(entry.first)) {
      error =
          filePath + " has tensor '" + entry.first + "' that " + kManifestFile + " does not list";
      return nullptr;
    }
  return (files_[file] = std::move(contents)).get();
}

/// Calls `run(fromIndex, toIndex, n)` for each run of n elements along the last dim of the
/// part of box `from` (at `fromOffset` in the whole tensor) that box `to` (at `toOffset`)
/// overlaps, indices counted in elements of each box; stops at the first run that returns
/// false. Returns the elements visited, or -1 when a run failed.
template <class Run>
static int64_t forEachOverlapRun(const std::vector<int64_t> &fromOffset,
                                 const std::vector<int64_t> &fromShape,
                                 const std::vector<int64_t> &toOffset,
                                 const std::vector<int64_t> &toShape, Run run) {
  const size_t rank = toShape.size();
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(fromOffset[d], toOffset[d]);
    hi[d] = std::min(fromOffset[d] + fromShape[d], toOffset[d] + toShape[d]);
    if (lo[d] >= hi[d])
      return 0;
  }
  if (rank == 0)
    return run(0, 0, 1) ? 1 : -1;
  // Row by row along the last dim: `at` walks the overlap's indices of the other dims.
  const int64_t length = hi[rank - 1] - lo[rank - 1];
  std::vector<int64_t> at(lo.begin(), lo.end());
  int64_t copied = 0;
  for (;;) {
    int64_t fromIndex = 0, toIndex = 0;
    for (size_t d = 0; d < rank; ++d) {
      fromIndex = fromIndex * fromShape[d] + (at[d] - fromOffset[d]);
      toIndex = toIndex * toShape[d] + (at[d] - toOffset[d]);
    }
    if (!run(fromIndex, toIndex, length))
      return -1;
    copied += length;
    size_t d = rank - 1;
    while (d > 0 && ++at[d - 1] == hi[d - 1]) {
      at[d - 1] = lo[d - 1];
      --d;
    }
    if (d == 0)
      return copied;
  }
}

bool LoadedCheckpoint::readBlock(const std::string &name, const std::vector<int64_t> &offset,
                                 const std::vector<int64_t> &shape, void *out,
                                 std::string &error) const {
  const StoredTensor *tensor = find(name);
  if (!tensor) {
    error = "checkpoint " + path + " lacks '" + name + "'";
    return false;
  }
  if (offset.size() != tensor->shape.size() || shape.size() != tensor->shape.size()) {
    error = "checkpoint " + path + ": '" + name + "' is " + formatShape(tensor->shape);
    return false;
  }
  // 16-bit floats are widened to F32; every other type is copied as it is.
  const DType stored = tensor->dtype;
  const bool widen = stored == DType::BF16 || stored == DType::F16;
  const int64_t fromBytes = dtypeSize(stored), toBytes = widen ? 4 : fromBytes;
  int64_t copied = 0;
  for (const StoredShard &shard : tensor->shards) {
    bool overlaps = true;
    for (size_t d = 0; d < shape.size(); ++d)
      overlaps = overlaps && shard.offset[d] < offset[d] + shape[d] &&
                 offset[d] < shard.offset[d] + shard.shape[d];
    if (!overlaps)
      continue;
    const SafetensorsFile *file = open(shard.file, error);
    if (!file)
      return false;
    const ByteSpan &bytes = file->find(name)->bytes;
    const int64_t n =
        forEachOverlapRun(shard.offset, shard.shape, offset, shape,
                          [&](int64_t fromIndex, int64_t toIndex, int64_t length) {
                            // Each run's bytes are checked before they are used: a corrupt slice is
                            // refused, and the rest of the file is neither read nor checked.
                            const int64_t begin = fromIndex * fromBytes,
                                          end = begin + length * fromBytes;
                            if (!check(name, shard, bytes, begin, end, error))
                              return false;
                            const uint8_t *from = bytes.data() + begin;
                            uint8_t *to = static_cast<uint8_t *>(out) + toIndex * toBytes;
                            if (!widen)
                              std::memcpy(to, from, static_cast<size_t>(end - begin));
                            else
                              widenToF32(stored, from, length, reinterpret_cast<float *>(to));
                            return true;
                          });
    if (n < 0)
      return false;
    copied += n;
  }
  if (copied != shapeElements(shape)) {
    error = "checkpoint " + path + ": the shards of '" + name + "' do not cover the block at " +
            formatShape(offset) + " of shape " + formatShape(shape);
    return false;
  }
  return true;
}

bool LoadedCheckpoint::check(const std::string &name, const StoredShard &shard,
                             const ByteSpan &bytes, int64_t begin, int64_t end,
                             std::string &error) const {
  const int64_t size = static_cast<int64_t>(bytes.size());
  for (int64_t c = begin / shard.chunkBytes; c * shard.chunkBytes < end; ++c) {
    if (shard.checked[static_cast<size_t>(c)])
      continue;
    const int64_t from = c * shard.chunkBytes, n = std::min(shard.chunkBytes, size - from);
    if (shardChecksum(bytes.data() + from, static_cast<size_t>(n), shard.fnv) !=
        shard.checksums[static_cast<size_t>(c)]) {
      error = path + "/" + shard.file + ": tensor '" + name + "' does not match its checksum in " +
              kManifestFile + " (the file is corrupt" +
              (shard.checksums.size() > 1 ? ", in bytes " + std::to_string(from) + " to " +
                                                std::to_string(from + n) + " of its data"
                                          : std::string()) +
              ")";
      return false;
    }
    shard.checked[static_cast<size_t>(c)] = true;
    bytesChecked_ += static_cast<uint64_t>(n);
  }
  return true;
}

std::unique_ptr<LoadedCheckpoint> loadCheckpoint(const std::string &pathOrDir, std::string &error) {
  return Loader().load(pathOrDir, error);
}

bool checkCompatible(const LoadedCheckpoint &checkpoint,
                     const std::vector<std::pair<std::string, std::vector<int64_t>>> &modelParams,
                     const std::string &modelName, std::string &error) {
  if (checkpoint.model != modelName) {
    error = "checkpoint " + checkpoint.path + " is for model '" + checkpoint.model + "', not '" +
            modelName + "'";
    return false;
  }
  std::vector<std::string> problems;
  std::set<std::string> inModel;
  for (const auto &[name, shape] : modelParams) {
    inModel.insert(name);
    auto it = checkpoint.params.find(name);
    const StoredTensor *tensor = it == checkpoint.params.end() ? nullptr : &it->second;
    if (!tensor)
      problems.push_back("the model has parameter '" + name + "' that the checkpoint lacks");
    else if (tensor->shape != shape)
      problems.push_back("parameter '" + name + "' has shape " + formatShape(tensor->shape) +
                         " in the checkpoint but " + formatShape(shape) + " in the model");
  }
  for (const std::string &name : checkpoint.paramNames)
    if (!inModel.count(name))
      problems.push_back("the checkpoint has parameter '" + name + "' that the model lacks");
  if (problems.empty())
    return true;
  // A wholly different model lists every parameter; the first few say enough.
  constexpr size_t kShown = 10;
  error.clear();
  for (size_t i = 0; i < problems.size() && i < kShown; ++i)
    error += (i ? "\n" : "") + problems[i];
  if (problems.size() > kShown)
    error += "\n... and " + std::to_string(problems.size() - kShown) + " more mismatches";
  return false;
}

} // namespace tessel::rt
