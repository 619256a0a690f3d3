//===- CheckpointTest.cpp - Tests of checkpoint save, load and resume -----===//

#include "runtime/Checkpoint.h"
#include "runtime/AtomicFile.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <unistd.h>

using namespace tessel::rt;
using tessel::test::readFile;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace fs = std::filesystem;

namespace {

/// A small model's training state; `seed` makes the values differ between saves.
struct State {
  explicit State(float seed) {
    for (size_t i = 0; i < wte.size(); ++i)
      wte[i] = seed + float(i);
    for (size_t i = 0; i < wq.size(); ++i)
      wq[i] = seed * 0.5f - float(i);
    m = wte;
    v = wq;
  }
  std::vector<float> wte = std::vector<float>(16 * 8);
  std::vector<float> wq = std::vector<float>(8 * 2 * 4);
  std::vector<float> m, v;
  int64_t adamStep = 42;

  CheckpointContents contents(int64_t step) const {
    CheckpointContents c;
    c.model = "tiny_gpt";
    c.fingerprint = "plan-0123abcd";
    c.step = step;
    c.extra = Json::object();
    c.extra.set("lr", 3e-4);
    c.extra.set("rng", Json(Json::Array{uint64_t(1) << 62, 2, 3, 4}));
    c.extra.set("data", "train.bin");
    // Parameters in model order (not sorted), which the manifest keeps.
    c.params = {{"wte", DType::F32, {16, 8}, wte.data()},
                {"layers.0.wq", DType::F32, {8, 2, 4}, wq.data()}};
    c.optimizerState = {{"wte.m", DType::F32, {16, 8}, m.data()},
                        {"layers.0.wq.v", DType::F32, {8, 2, 4}, v.data()},
                        {"step", DType::I64, {}, &adamStep}};
    return c;
  }
};

std::vector<float> floatsOf(const SafetensorsTensor &tensor) {
  std::vector<float> values(tensor.bytes.size() / 4);
  std::memcpy(values.data(), tensor.bytes.data(), tensor.bytes.size());
  return values;
}

/// Names in `dir`, sorted.
std::set<std::string> listing(const std::string &dir) {
  std::set<std::string> names;
  for (const auto &entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

std::string loadError(const std::string &path) {
  std::string error;
  EXPECT_FALSE(loadCheckpoint(path, error)) << path;
  return error;
}

using ModelParams = std::vector<std::pair<std::string, std::vector<int64_t>>>;

TEST(Checkpoint, SaveAndLoadRoundTrip) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(saveCheckpoint(run / "ckpt", state.contents(10), error)) << error;
  EXPECT_EQ(listing(run / "ckpt"), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(listing(run / "ckpt/step_00000010"),
            (std::set<std::string>{"manifest.json", "model.safetensors", "optimizer.safetensors"}));
  EXPECT_EQ(readFile(run / "ckpt/latest"), "step_00000010\n");

  for (std::string path : {run / "ckpt", run / "ckpt/", run / "ckpt/step_00000010"}) {
    auto loaded = loadCheckpoint(path, error);
    ASSERT_TRUE(loaded) << path << ": " << error;
    EXPECT_EQ(loaded->path, run / "ckpt/step_00000010");
    EXPECT_EQ(loaded->model, "tiny_gpt");
    EXPECT_EQ(loaded->fingerprint, "plan-0123abcd");
    EXPECT_EQ(loaded->step, 10);
    EXPECT_EQ(loaded->extra, state.contents(10).extra);
    EXPECT_EQ(loaded->extra.find("rng")->items()[0].asInt(), int64_t(1) << 62);
    EXPECT_EQ(loaded->paramNames, (std::vector<std::string>{"wte", "layers.0.wq"}));
    EXPECT_EQ(loaded->optimizerNames, (std::vector<std::string>{"wte.m", "layers.0.wq.v", "step"}));
    EXPECT_EQ(floatsOf(*loaded->params->find("wte")), state.wte);
    EXPECT_EQ(floatsOf(*loaded->params->find("layers.0.wq")), state.wq);
    EXPECT_EQ(loaded->params->find("layers.0.wq")->shape, (std::vector<int64_t>{8, 2, 4}));
    EXPECT_EQ(floatsOf(*loaded->optimizer->find("wte.m")), state.m);
    const SafetensorsTensor *step = loaded->optimizer->find("step");
    ASSERT_TRUE(step);
    EXPECT_EQ(step->dtype, DType::I64);
    int64_t adamStep;
    std::memcpy(&adamStep, step->bytes.data(), 8);
    EXPECT_EQ(adamStep, 42);
  }
}

TEST(Checkpoint, ManifestIsReadable) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(saveCheckpoint(run.path(), state.contents(300), error)) << error;
  std::string manifest = readFile(run / "step_00000300/manifest.json");
  EXPECT_EQ(manifest.rfind(R"({
  "format": "tessel-checkpoint",
  "version": 2,
  "model": "tiny_gpt",
  "fingerprint": "plan-0123abcd",
  "step": 300,)",
                           0),
            0u)
      << manifest;
  EXPECT_NE(manifest.find(R"(    "layers.0.wq": {
      "dtype": "F32",
      "shape": [8, 2, 4],
      "fnv1a64": ")"),
            std::string::npos)
      << manifest;
  EXPECT_EQ(manifest.back(), '\n');
}

TEST(Checkpoint, RefusesTensorDataThatDoesNotMatchItsChecksum) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(saveCheckpoint(run.path(), state.contents(5), error)) << error;
  std::string file = run / "step_00000005/model.safetensors";
  std::string bytes = readFile(file);
  bytes[bytes.size() - 3] ^= 0x10; // Inside the last tensor's data, past the JSON header.
  writeFile(file, bytes);
  EXPECT_FALSE(loadCheckpoint(run.path(), error));
  EXPECT_NE(error.find("does not match its checksum"), std::string::npos) << error;
}

TEST(Checkpoint, LatestFollowsTheNewestSave) {
  ScratchDir run;
  std::string error;
  State first(1.0f), second(2.0f);
  ASSERT_TRUE(saveCheckpoint(run.path(), first.contents(10), error)) << error;
  ASSERT_TRUE(saveCheckpoint(run.path(), second.contents(20), error)) << error;
  EXPECT_EQ(readFile(run / "latest"), "step_00000020\n");
  auto latest = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(latest) << error;
  EXPECT_EQ(latest->step, 20);
  EXPECT_EQ(floatsOf(*latest->params->find("wte")), second.wte);
  // The older checkpoint stays loadable by its directory.
  auto older = loadCheckpoint(run / "step_00000010", error);
  ASSERT_TRUE(older) << error;
  EXPECT_EQ(floatsOf(*older->params->find("wte")), first.wte);
  EXPECT_EQ(listing(run.path()),
            (std::set<std::string>{"latest", "step_00000010", "step_00000020"}));
}

TEST(Checkpoint, SavingTheSameStepReplacesIt) {
  ScratchDir run;
  std::string error;
  State first(1.0f), second(5.0f);
  ASSERT_TRUE(saveCheckpoint(run.path(), first.contents(10), error)) << error;
  ASSERT_TRUE(saveCheckpoint(run.path(), second.contents(10), error)) << error;
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(floatsOf(*loaded->params->find("wte")), second.wte);
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
}

TEST(Checkpoint, FailedSaveLeavesThePreviousCheckpoint) {
  ScratchDir run;
  std::string error;
  State good(1.0f), bad(9.0f);
  ASSERT_TRUE(saveCheckpoint(run.path(), good.contents(10), error)) << error;

  // model.safetensors is written, then the optimizer state fails: a tensor without data.
  CheckpointContents broken = bad.contents(20);
  broken.optimizerState[1].data = nullptr;
  EXPECT_FALSE(saveCheckpoint(run.path(), broken, error));
  EXPECT_EQ(error, "cannot save checkpoint " + (run / "step_00000020") + ": cannot write " +
                       (run / ".step_00000020" + tempSuffix()) +
                       "/optimizer.safetensors: tensor 'layers.0.wq.v' has no data");
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(readFile(run / "latest"), "step_00000010\n");
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->step, 10);
  EXPECT_EQ(floatsOf(*loaded->params->find("wte")), good.wte);

  // The same failure while re-saving step 10 leaves step 10 as it was.
  broken.step = 10;
  EXPECT_FALSE(saveCheckpoint(run.path(), broken, error));
  loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(floatsOf(*loaded->params->find("wte")), good.wte);
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
}

TEST(Checkpoint, FailureToUpdateLatestKeepsTheOldLatest) {
  ScratchDir run;
  std::string error;
  State state(1.0f);
  ASSERT_TRUE(saveCheckpoint(run.path(), state.contents(10), error)) << error;
  // A directory where latest's temporary file goes makes the update fail.
  fs::create_directory(run / ("latest" + tempSuffix()));
  writeFile(run / ("latest" + tempSuffix()) + "/x", "");
  EXPECT_FALSE(saveCheckpoint(run.path(), state.contents(20), error));
  EXPECT_NE(error.find("checkpoint " + (run / "step_00000020") + " was saved but " + run.path() +
                       "/latest not updated: cannot create"),
            std::string::npos)
      << error;
  EXPECT_EQ(readFile(run / "latest"), "step_00000010\n");
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->step, 10);
}

TEST(Checkpoint, StaleTemporaryDirectoryIsReplaced) {
  ScratchDir run;
  std::string error;
  // A crashed earlier process with the same pid (common in containers) left its temp dir.
  std::string stale = run / (".step_00000010" + tempSuffix());
  fs::create_directories(stale);
  writeFile(stale + "/model.safetensors", "half written");
  State state(1.0f);
  ASSERT_TRUE(saveCheckpoint(run.path(), state.contents(10), error)) << error;
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_TRUE(loadCheckpoint(run.path(), error)) << error;
}

TEST(Checkpoint, SaveErrors) {
  ScratchDir run;
  std::string error;
  State state(1.0f);
  writeFile(run / "file", "x");
  EXPECT_FALSE(saveCheckpoint(run / "file", state.contents(1), error));
  EXPECT_EQ(error.rfind("cannot create checkpoint directory " + (run / "file") + ": ", 0), 0u)
      << error;
  EXPECT_FALSE(saveCheckpoint(run.path(), state.contents(-1), error));
  EXPECT_EQ(error, "cannot save a checkpoint for negative step -1");
  CheckpointContents duplicate = state.contents(1);
  duplicate.params.push_back(duplicate.params[0]);
  EXPECT_FALSE(saveCheckpoint(run.path(), duplicate, error));
  EXPECT_NE(error.find("tensor 'wte' appears twice"), std::string::npos) << error;
  EXPECT_TRUE(listing(run.path()) == std::set<std::string>{"file"});
}

TEST(Checkpoint, LoadFindsTheCheckpoint) {
  ScratchDir run;
  std::string error;
  EXPECT_EQ(loadError(run / "nope"), "checkpoint " + (run / "nope") + " does not exist");
  writeFile(run / "file", "x");
  EXPECT_EQ(loadError(run / "file"),
            "checkpoint " + (run / "file") +
                " is not a directory (give a checkpoint directory or a run directory)");
  EXPECT_EQ(loadError(run.path()),
            run.path() + " is neither a checkpoint (no manifest.json) nor a run directory (no "
                         "'latest' file)");
  writeFile(run / "latest", "step_00000099\n");
  EXPECT_EQ(loadError(run.path()), (run / "latest") + " names step_00000099, which does not exist");
  writeFile(run / "latest", "../elsewhere\n");
  EXPECT_EQ(loadError(run.path()), (run / "latest") + " does not hold a checkpoint directory name");
  writeFile(run / "latest", "\n");
  EXPECT_EQ(loadError(run.path()), (run / "latest") + " does not hold a checkpoint directory name");
}

/// Saves a checkpoint, lets `edit` change its manifest, and returns the load error.
template <typename Edit> std::string manifestError(const ScratchDir &run, Edit edit) {
  State state(1.0f);
  std::string error;
  EXPECT_TRUE(saveCheckpoint(run.path(), state.contents(10), error)) << error;
  std::string path = run / "step_00000010/manifest.json";
  std::optional<Json> manifest = readJsonFile(path, error);
  EXPECT_TRUE(manifest) << error;
  edit(*manifest);
  // Sealed again, as a writer that meant it would: the fields themselves are checked.
  if (manifest->isObject() && manifest->find("checksum"))
    manifest->set("checksum", manifestChecksum(*manifest));
  writeFile(path, manifest->pretty());
  return loadError(run.path());
}

TEST(Checkpoint, ManifestIsProtectedByItsChecksum) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(saveCheckpoint(run.path(), state.contents(10), error)) << error;
  std::string path = run / "step_00000010/manifest.json";
  std::string text = readFile(path);
  // An edit of any field (here the step, with the directory renamed to match) is found.
  std::string edited = text;
  edited.replace(edited.find("\"step\": 10,"), 11, "\"step\": 11,");
  writeFile(path, edited);
  EXPECT_EQ(loadError(run / "step_00000010"),
            path + ": does not match its checksum (it was edited or is corrupt)");
  // A manifest without a checksum is refused too.
  std::optional<Json> manifest = readJsonFile(path, error);
  ASSERT_TRUE(manifest) << error;
  Json stripped = Json::object();
  for (const auto &[key, value] : manifest->members())
    if (key != "checksum")
      stripped.set(key, value);
  writeFile(path, stripped.pretty());
  EXPECT_EQ(loadError(run / "step_00000010"), path + ": lacks its string 'checksum'");
  // A sealed manifest whose step is not its directory's.
  stripped.set("step", 11);
  stripped.set("checksum", manifestChecksum(stripped));
  writeFile(path, stripped.pretty());
  EXPECT_EQ(loadError(run / "step_00000010"),
            path + ": says step 11 but its directory is that of step 10");
}

TEST(Checkpoint, ManifestIsValidated) {
  ScratchDir run;
  std::string manifest = run / "step_00000010/manifest.json";
  auto error = [&](auto edit) { return manifestError(run, edit); };
  EXPECT_EQ(error([](Json &m) { m.set("format", "other"); }),
            manifest + ": is not a Tessel checkpoint manifest (its 'format' is not "
                       "'tessel-checkpoint')");
  EXPECT_EQ(error([](Json &m) { m.set("version", 1); }),
            manifest + ": has version 1; this build reads version 2");
  EXPECT_EQ(error([](Json &m) { m.set("version", "1"); }),
            manifest + ": lacks an integer 'version'");
  EXPECT_EQ(error([](Json &m) { m.set("model", 3); }), manifest + ": lacks a string 'model'");
  EXPECT_EQ(error([](Json &m) { m.set("fingerprint", nullptr); }),
            manifest + ": lacks a string 'fingerprint'");
  EXPECT_EQ(error([](Json &m) { m.set("step", "10"); }),
            manifest + ": lacks a non-negative integer 'step'");
  EXPECT_EQ(error([](Json &m) { m.set("step", -5); }),
            manifest + ": lacks a non-negative integer 'step'");
  EXPECT_EQ(error([](Json &m) { m = Json(Json::Array{}); }), manifest + ": is not a JSON object");
  EXPECT_EQ(error([](Json &m) {
              Json copy = Json::object();
              for (const auto &[key, value] : m.members())
                if (key != "extra")
                  copy.set(key, value);
              m = copy;
            }),
            manifest + ": lacks 'extra'");
  EXPECT_EQ(error([](Json &m) { m.set("params", Json::array()); }),
            manifest + ": 'params' is not an object of tensors");
  EXPECT_EQ(error([](Json &m) {
              Json copy = Json::object();
              for (const auto &[key, value] : m.members())
                if (key != "optimizer")
                  copy.set(key, value);
              m = copy;
            }),
            manifest + ": lacks 'optimizer'");
  EXPECT_EQ(error([](Json &m) { m.find("params")->set("wte", Json::object()); }),
            manifest + ": 'params' tensor 'wte' needs a string 'dtype' and an array 'shape'");
  EXPECT_EQ(error([](Json &m) { m.find("params")->find("wte")->set("dtype", "F64"); }),
            manifest + ": 'params' tensor 'wte' has unknown dtype 'F64'");
  EXPECT_EQ(error([](Json &m) {
              m.find("params")->find("wte")->set("shape", Json(Json::Array{16, -8}));
            }),
            manifest + ": 'params' tensor 'wte' has a shape that is not a list of "
                       "non-negative integers");

  // The manifest and the tensor files must agree.
  std::string model = run / "step_00000010/model.safetensors";
  std::string optimizer = run / "step_00000010/optimizer.safetensors";
  EXPECT_EQ(error([](Json &m) {
              m.find("params")->find("wte")->set("shape", Json(Json::Array{8, 16}));
            }),
            "tensor 'wte' is F32 [8, 16] in manifest.json but F32 [16, 8] in " + model);
  EXPECT_EQ(error([](Json &m) { m.find("optimizer")->find("step")->set("dtype", "I32"); }),
            "tensor 'step' is I32 [] in manifest.json but I64 [] in " + optimizer);
  EXPECT_EQ(error([](Json &m) { m.find("params")->set("wpe", *m.find("params")->find("wte")); }),
            model + " lacks tensor 'wpe' that manifest.json lists");
  EXPECT_EQ(error([](Json &m) {
              Json params = Json::object();
              params.set("wte", *m.find("params")->find("wte"));
              m.set("params", params);
            }),
            model + " has tensor 'layers.0.wq' that manifest.json does not list");
}

TEST(Checkpoint, CorruptFilesAreRefused) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(saveCheckpoint(run.path(), state.contents(10), error)) << error;
  std::string model = run / "step_00000010/model.safetensors";
  std::string bytes = readFile(model);
  writeFile(model, bytes.substr(0, bytes.size() - 4));
  EXPECT_EQ(loadError(run.path()).rfind(model + ": ", 0), 0u);
  writeFile(model, bytes);
  std::string manifest = run / "step_00000010/manifest.json";
  std::string goodManifest = readFile(manifest);
  writeFile(manifest, "{\"format\": \"tessel-checkpoint\",");
  EXPECT_EQ(loadError(run.path()),
            manifest + ": expected a string key, found the end of the input at byte 31");
  writeFile(manifest, goodManifest);
  std::string optimizer = run / "step_00000010/optimizer.safetensors";
  fs::remove(optimizer);
  EXPECT_EQ(loadError(run.path()), optimizer + ": cannot open: No such file or directory");
}

TEST(Checkpoint, CompatibilityMessagesNameTheMismatch) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(saveCheckpoint(run / "x", state.contents(10), error)) << error;
  auto loaded = loadCheckpoint(run / "x", error);
  ASSERT_TRUE(loaded) << error;

  ModelParams same = {{"layers.0.wq", {8, 2, 4}}, {"wte", {16, 8}}};
  EXPECT_TRUE(checkCompatible(*loaded, same, "tiny_gpt", error)) << error;

  EXPECT_FALSE(checkCompatible(*loaded, same, "llama_small", error));
  EXPECT_EQ(error, "checkpoint " + (run / "x/step_00000010") +
                       " is for model 'tiny_gpt', not 'llama_small'");

  ModelParams reshaped = {{"wte", {16, 8}}, {"layers.0.wq", {8, 4, 2}}};
  EXPECT_FALSE(checkCompatible(*loaded, reshaped, "tiny_gpt", error));
  EXPECT_EQ(error,
            "parameter 'layers.0.wq' has shape [8, 2, 4] in the checkpoint but [8, 4, 2] in the "
            "model");

  ModelParams different = {{"wte", {16, 8}}, {"wpe", {32, 8}}};
  EXPECT_FALSE(checkCompatible(*loaded, different, "tiny_gpt", error));
  EXPECT_EQ(error, "the model has parameter 'wpe' that the checkpoint lacks\n"
                   "the checkpoint has parameter 'layers.0.wq' that the model lacks");

  ModelParams many;
  for (int i = 0; i < 14; ++i)
    many.push_back({"extra." + std::to_string(i), {1}});
  many.push_back({"wte", {16, 8}});
  many.push_back({"layers.0.wq", {8, 2, 4}});
  EXPECT_FALSE(checkCompatible(*loaded, many, "tiny_gpt", error));
  EXPECT_EQ(error.substr(error.rfind('\n') + 1), "... and 4 more mismatches");
}

TEST(Checkpoint, Names) {
  EXPECT_EQ(checkpointName(300), "step_00000300");
  EXPECT_EQ(checkpointName(123456789), "step_123456789");
}

} // namespace
