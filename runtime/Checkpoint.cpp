//===- Checkpoint.cpp - Saving and resuming training state ----------------===//

#include "runtime/Checkpoint.h"

#include "common/Checksum.h"

#include "runtime/AtomicFile.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

namespace tessel::rt {

namespace fs = std::filesystem;

static constexpr const char *kFormat = "tessel-checkpoint";
static constexpr int64_t kVersion = 2;
static constexpr const char *kModelFile = "model.safetensors";
static constexpr const char *kOptimizerFile = "optimizer.safetensors";
static constexpr const char *kManifestFile = "manifest.json";
static constexpr const char *kLatestFile = "latest";

std::string checkpointName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

/// `path` without trailing slashes, so joined paths read cleanly in messages.
static std::string trimSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();
  return path;
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

static Json describeTensors(const std::vector<TensorView> &tensors) {
  Json list = Json::object();
  for (const TensorView &tensor : tensors) {
    Json shape = Json::array();
    for (int64_t dim : tensor.shape)
      shape.push(dim);
    Json entry = Json::object();
    entry.set("dtype", dtypeName(tensor.dtype));
    entry.set("shape", std::move(shape));
    int64_t bytes = shapeElements(tensor.shape) * dtypeSize(tensor.dtype);
    entry.set("fnv1a64", hex64(fnv1a64(tensor.data, static_cast<size_t>(bytes))));
    list.set(tensor.name, std::move(entry));
  }
  return list;
}

std::string manifestChecksum(const Json &manifest) {
  Json body = Json::object();
  for (const auto &[key, value] : manifest.members())
    if (key != "checksum")
      body.set(key, value);
  std::string text = body.compact();
  return hex64(fnv1a64(text.data(), text.size()));
}

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

/// Writes the checkpoint's three files into `tempDir`.
static bool writeContents(const std::string &tempDir, const CheckpointContents &contents,
                          std::string &error) {
  std::map<std::string, std::string> metadata = {
      {"format", kFormat}, {"model", contents.model}, {"step", std::to_string(contents.step)}};
  if (!writeSafetensors(tempDir + "/" + kModelFile, contents.params, metadata, error) ||
      !writeSafetensors(tempDir + "/" + kOptimizerFile, contents.optimizerState, metadata, error))
    return false;
  Json manifest = Json::object();
  manifest.set("format", kFormat);
  manifest.set("version", kVersion);
  manifest.set("model", contents.model);
  manifest.set("fingerprint", contents.fingerprint);
  manifest.set("step", contents.step);
  manifest.set("params", describeTensors(contents.params));
  manifest.set("optimizer", describeTensors(contents.optimizerState));
  manifest.set("extra", contents.extra);
  // Last, over everything before it: an edited or damaged manifest is refused like a tensor.
  manifest.set("checksum", manifestChecksum(manifest));
  return writeFileAtomically(tempDir + "/" + kManifestFile, manifest.pretty() + "\n", error) &&
         fsyncDirectory(tempDir, error);
}

bool saveCheckpoint(const std::string &dirArg, const CheckpointContents &contents,
                    std::string &error) {
  std::string dir = trimSlashes(dirArg);
  if (contents.step < 0) {
    error = "cannot save a checkpoint for negative step " + std::to_string(contents.step);
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
  std::string name = checkpointName(contents.step);
  std::string finalDir = dir + "/" + name;
  std::string tempDir = dir + "/." + name + tempSuffix();
  // A leftover of an earlier process with our pid (containers reuse pids) is garbage.
  fs::remove_all(tempDir, ec);
  if (!fs::create_directory(tempDir, ec)) {
    error = "cannot create " + tempDir + ": " + (ec ? ec.message() : "it exists");
    return false;
  }
  if (!writeContents(tempDir, contents, error) ||
      !replaceDirectoryAtomically(tempDir, finalDir, error)) {
    fs::remove_all(tempDir, ec);
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

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

namespace {

struct ManifestTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string checksum; ///< FNV-1a 64 of the tensor's bytes, in hex.
};

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
    if (!readWholeFile(latestPath, latest, error_))
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

  bool readTensorList(const Json &manifest, const char *field,
                      std::vector<ManifestTensor> &tensors) {
    const Json *list = manifest.find(field);
    if (!list)
      return refuse(std::string("lacks '") + field + "'");
    if (!list->isObject())
      return refuse(std::string("'") + field + "' is not an object of tensors");
    for (const auto &[name, entry] : list->members()) {
      std::string where = std::string("'") + field + "' tensor '" + name + "'";
      const Json *dtypeJson = entry.find("dtype");
      const Json *shapeJson = entry.find("shape");
      if (!entry.isObject() || !dtypeJson || !shapeJson || !dtypeJson->isString() ||
          !shapeJson->isArray())
        return refuse(where + " needs a string 'dtype' and an array 'shape'");
      std::optional<DType> dtype = parseDType(dtypeJson->asString());
      if (!dtype)
        return refuse(where + " has unknown dtype '" + dtypeJson->asString() + "'");
      const Json *checksum = entry.find("fnv1a64");
      if (!checksum || !checksum->isString())
        return refuse(where + " lacks its checksum 'fnv1a64'");
      ManifestTensor tensor{name, *dtype, {}, checksum->asString()};
      for (const Json &dim : shapeJson->items()) {
        if (!dim.isInteger() || dim.asInt() < 0)
          return refuse(where + " has a shape that is not a list of non-negative integers");
        tensor.shape.push_back(dim.asInt());
      }
      tensors.push_back(std::move(tensor));
    }
    return true;
  }

  /// Reads `file` and checks it holds exactly the manifest's `tensors`.
  std::unique_ptr<SafetensorsFile> readTensors(const std::string &file,
                                               const std::vector<ManifestTensor> &tensors) {
    auto contents = readSafetensors(file, error_);
    if (!contents)
      return nullptr;
    std::set<std::string> listed;
    for (const ManifestTensor &tensor : tensors) {
      listed.insert(tensor.name);
      const SafetensorsTensor *found = contents->find(tensor.name);
      if (!found)
        return fail(file + " lacks tensor '" + tensor.name + "' that " + kManifestFile + " lists");
      if (found->dtype != tensor.dtype || found->shape != tensor.shape)
        return fail("tensor '" + tensor.name + "' is " + dtypeName(tensor.dtype) + " " +
                    formatShape(tensor.shape) + " in " + kManifestFile + " but " +
                    dtypeName(found->dtype) + " " + formatShape(found->shape) + " in " + file);
      if (hex64(fnv1a64(found->bytes.data(), found->bytes.size())) != tensor.checksum)
        return fail(file + ": tensor '" + tensor.name + "' does not match its checksum in " +
                    kManifestFile + " (the file is corrupt)");
    }
    for (const auto &entry : contents->tensors)
      if (!listed.count(entry.first))
        return fail(file + " has tensor '" + entry.first + "' that " + kManifestFile +
                    " does not list");
    return contents;
  }

  std::unique_ptr<LoadedCheckpoint> loadImpl(const std::string &path) {
    auto checkpoint = std::make_unique<LoadedCheckpoint>();
    if (!resolve(path, checkpoint->path))
      return nullptr;
    manifestPath_ = checkpoint->path + "/" + kManifestFile;
    std::optional<Json> manifest = readJsonFile(manifestPath_, error_);
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
    if (version->asInt() != kVersion)
      return refuse("has version " + std::to_string(version->asInt()) +
                    "; this build reads version " + std::to_string(kVersion)),
             nullptr;
    const Json *checksum = manifest->find("checksum");
    if (!checksum || !checksum->isString())
      return fail(manifestPath_ + ": lacks its string 'checksum'");
    if (checksum->asString() != manifestChecksum(*manifest))
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

    std::vector<ManifestTensor> params, optimizer;
    if (!readTensorList(*manifest, "params", params) ||
        !readTensorList(*manifest, "optimizer", optimizer))
      return nullptr;
    for (const ManifestTensor &tensor : params)
      checkpoint->paramNames.push_back(tensor.name);
    for (const ManifestTensor &tensor : optimizer)
      checkpoint->optimizerNames.push_back(tensor.name);
    checkpoint->params = readTensors(checkpoint->path + "/" + kModelFile, params);
    if (!checkpoint->params)
      return nullptr;
    checkpoint->optimizer = readTensors(checkpoint->path + "/" + kOptimizerFile, optimizer);
    if (!checkpoint->optimizer)
      return nullptr;
    return checkpoint;
  }

  std::string manifestPath_;
  std::string error_;
};

} // namespace

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
    const SafetensorsTensor *tensor = checkpoint.params ? checkpoint.params->find(name) : nullptr;
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
