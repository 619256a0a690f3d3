//===- CheckpointCorruptionTest.cpp - Checkpoints that loading refuses ----===//
//
// A manifest edited, invalid, sealed with the wrong checksum or at odds with its shard files,
// shards that do not cover their tensor, and shard files corrupt, truncated or missing: each is
// refused with a message that names the file and what is wrong, and what is intact still reads.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "test/unit/CheckpointTestSupport.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace tessel::rt;
using namespace tessel::test;

namespace fs = std::filesystem;

namespace {

TEST(Checkpoint, RefusesTensorDataThatDoesNotMatchItsChecksum) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run.path(), 5, error)) << error;
  std::string file = run / "step_00000005/model-00001.safetensors";
  std::string bytes = readFile(file);
  bytes[bytes.size() - 3] ^= 0x10; // Inside the last tensor's data ('wte'), past the JSON header.
  writeFile(file, bytes);
  // Shard files are checked when a block needs them: the manifest still loads.
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  const std::string refused =
      file + ": tensor 'wte' does not match its checksum in manifest.json (the file is corrupt)";
  EXPECT_EQ(readError(*loaded, "wte"), refused);
  // Only what the damaged bytes' checksum covers is refused: another tensor of the same file
  // checks out and reads...
  EXPECT_EQ(readFloats(*loaded, "layers.0.wq", {4, 0, 0}, {4, 2, 4}),
            std::vector<float>(state.wq.begin() + 32, state.wq.end()));
  // ... and blocks that only need the other rank's file still read.
  EXPECT_EQ(readFloats(*loaded, "wte", {0, 0}, {8, 8}),
            std::vector<float>(state.wte.begin(), state.wte.begin() + 64));
  EXPECT_EQ(readWhole(*loaded, "wte.m"), state.m);
}

/// Saves a checkpoint and lets `edit` change its manifest, sealed again as a writer that meant
/// it would: the fields themselves are checked.
template <typename Edit> void editManifest(const ScratchDir &run, Edit edit) {
  State state(1.0f);
  std::string error;
  EXPECT_TRUE(state.save(run.path(), 10, error)) << error;
  std::string path = run / "step_00000010/manifest.json";
  std::optional<Json> manifest = readJsonFile(path, 1 << 30, error);
  ASSERT_TRUE(manifest) << error;
  edit(*manifest);
  if (manifest->isObject() && manifest->find("checksum"))
    manifest->set("checksum", manifestChecksum(*manifest, 4));
  writeFile(path, manifest->pretty());
}

/// The load error of a checkpoint whose manifest `edit` changed.
template <typename Edit> std::string manifestError(const ScratchDir &run, Edit edit) {
  editManifest(run, edit);
  return loadError(run.path());
}

/// The error of reading tensor `name` whole from a checkpoint whose manifest `edit` changed,
/// which loads: the shard files are checked when read.
template <typename Edit>
std::string shardError(const ScratchDir &run, const std::string &name, Edit edit) {
  editManifest(run, edit);
  std::string error;
  auto loaded = loadCheckpoint(run.path(), error);
  EXPECT_TRUE(loaded) << error;
  return loaded ? readError(*loaded, name) : error;
}

/// The manifest's entry for shard `i` of tensor `name` in list `kind` ("params", "optimizer").
Json &shardEntry(Json &manifest, const char *kind, const char *name, size_t i) {
  return manifest.find(kind)->find(name)->find("shards")->items().at(i);
}

TEST(Checkpoint, ManifestIsProtectedByItsChecksum) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run.path(), 10, error)) << error;
  std::string path = run / "step_00000010/manifest.json";
  std::string text = readFile(path);
  // An edit of any field (here the step, with the directory renamed to match) is found.
  std::string edited = text;
  edited.replace(edited.find("\"step\": 10,"), 11, "\"step\": 11,");
  writeFile(path, edited);
  EXPECT_EQ(loadError(run / "step_00000010"),
            path + ": does not match its checksum (it was edited or is corrupt)");
  // So is an edit of a shard's place.
  edited = text;
  edited.replace(edited.find("\"offset\": [8, 0]"), 16, "\"offset\": [0, 0]");
  writeFile(path, edited);
  EXPECT_EQ(loadError(run / "step_00000010"),
            path + ": does not match its checksum (it was edited or is corrupt)");
  // A manifest without a checksum is refused too.
  writeFile(path, text);
  std::optional<Json> manifest = readJsonFile(path, 1 << 30, error);
  ASSERT_TRUE(manifest) << error;
  Json stripped = Json::object();
  for (const auto &[key, value] : manifest->members())
    if (key != "checksum")
      stripped.set(key, value);
  writeFile(path, stripped.pretty());
  EXPECT_EQ(loadError(run / "step_00000010"), path + ": lacks its string 'checksum'");
  // A sealed manifest whose step is not its directory's.
  stripped.set("step", 11);
  stripped.set("checksum", manifestChecksum(stripped, 4));
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
  EXPECT_EQ(error([](Json &m) { m.set("version", 2); }),
            manifest + ": has version 2; this build reads versions 3 to 5");
  EXPECT_EQ(error([](Json &m) { m.set("version", 6); }),
            manifest + ": has version 6; this build reads versions 3 to 5");
  EXPECT_EQ(error([](Json &m) { m.set("version", "3"); }),
            manifest + ": lacks an integer 'version'");
  EXPECT_EQ(error([](Json &m) { m.set("model", 3); }), manifest + ": lacks a string 'model'");
  EXPECT_EQ(error([](Json &m) { m.set("fingerprint", nullptr); }),
            manifest + ": lacks a string 'fingerprint'");
  EXPECT_EQ(error([](Json &m) { m.set("step", "10"); }),
            manifest + ": lacks a non-negative integer 'step'");
  EXPECT_EQ(error([](Json &m) { m.set("step", -5); }),
            manifest + ": lacks a non-negative integer 'step'");
  EXPECT_EQ(error([](Json &m) { m = Json(Json::Array{}); }), manifest + ": is not a JSON object");
  auto without = [](Json &object, const std::string &name) {
    Json copy = Json::object();
    for (const auto &[key, value] : object.members())
      if (key != name)
        copy.set(key, value);
    object = copy;
  };
  EXPECT_EQ(error([&](Json &m) { without(m, "extra"); }), manifest + ": lacks 'extra'");
  EXPECT_EQ(error([](Json &m) { m.set("params", Json::array()); }),
            manifest + ": 'params' is not an object of tensors");
  EXPECT_EQ(error([&](Json &m) { without(m, "optimizer"); }), manifest + ": lacks 'optimizer'");

  // Each tensor: its dtype and shape.
  const std::string wte = manifest + ": 'params' tensor 'wte'";
  EXPECT_EQ(error([](Json &m) { m.find("params")->set("wte", Json::object()); }),
            wte + " needs a string 'dtype'");
  EXPECT_EQ(error([](Json &m) { m.find("params")->set("wte", 1); }),
            wte + " needs a string 'dtype'");
  EXPECT_EQ(error([](Json &m) { m.find("params")->find("wte")->set("dtype", "F64"); }),
            wte + " has unknown dtype 'F64'");
  EXPECT_EQ(error([&](Json &m) { without(*m.find("params")->find("wte"), "shape"); }),
            wte + " lacks its array 'shape'");
  EXPECT_EQ(error([](Json &m) {
              m.find("params")->find("wte")->set("shape", Json(Json::Array{16, -8}));
            }),
            wte + " has a 'shape' that is not a list of non-negative integers");

  // Its shards: each an object with its file, checksum, offset and shape, inside the tensor.
  EXPECT_EQ(error([&](Json &m) { without(*m.find("params")->find("wte"), "shards"); }),
            wte + " lacks its array 'shards'");
  EXPECT_EQ(error([](Json &m) { m.find("params")->find("wte")->set("shards", Json::object()); }),
            wte + " lacks its array 'shards'");
  EXPECT_EQ(error([](Json &m) { shardEntry(m, "params", "wte", 1) = Json("model-00001"); }),
            wte + " has a shard without a string 'file' and an array 'xxh3_chunks'");
  EXPECT_EQ(error([](Json &m) { shardEntry(m, "params", "wte", 1).set("file", 1); }),
            wte + " has a shard without a string 'file' and an array 'xxh3_chunks'");
  EXPECT_EQ(error([&](Json &m) { without(shardEntry(m, "params", "wte", 1), "xxh3_chunks"); }),
            wte + " has a shard without a string 'file' and an array 'xxh3_chunks'");
  EXPECT_EQ(error([](Json &m) { shardEntry(m, "params", "wte", 1).set("xxh3_chunks", "abc"); }),
            wte + " has a shard without a string 'file' and an array 'xxh3_chunks'");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("xxh3_chunks", Json(Json::Array{1}));
            }),
            wte + " has a shard whose 'xxh3_chunks' holds something other than strings");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("xxh3_chunks", Json(Json::Array{"a", "b"}));
            }),
            wte + " has a shard of 256 bytes with 2 chunk checksums, not 1");
  for (const char *file : {"../model-00001.safetensors", "sub/model-00001.safetensors",
                           ".model-00001.safetensors", ""})
    EXPECT_EQ(error([&](Json &m) { shardEntry(m, "params", "wte", 1).set("file", file); }),
              wte + " has a shard in '" + file +
                  "', which is not a file of the checkpoint directory");
  EXPECT_EQ(error([&](Json &m) { without(shardEntry(m, "params", "wte", 1), "offset"); }),
            wte + " lacks its array 'offset'");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("offset", Json(Json::Array{8, -1}));
            }),
            wte + " has a 'offset' that is not a list of non-negative integers");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("shape", Json(Json::Array{8, 8.5}));
            }),
            wte + " has a 'shape' that is not a list of non-negative integers");
  EXPECT_EQ(
      error([](Json &m) { shardEntry(m, "params", "wte", 1).set("offset", Json(Json::Array{8})); }),
      wte + " has a shard of another rank than the tensor's");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("shape", Json(Json::Array{8, 8, 1}));
            }),
            wte + " has a shard of another rank than the tensor's");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("offset", Json(Json::Array{12, 0}));
            }),
            wte + " has a shard that lies outside the tensor");
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("offset", Json(Json::Array{8, 1}));
            }),
            wte + " has a shard that lies outside the tensor");
}

TEST(Checkpoint, ManifestAndShardFilesMustAgree) {
  ScratchDir run;
  const std::string dir = run / "step_00000010";
  const std::string model0 = dir + "/model-00000.safetensors";
  const std::string model1 = dir + "/model-00001.safetensors";
  EXPECT_EQ(
      shardError(run, "wte", [](Json &m) { m.find("params")->find("wte")->set("dtype", "I32"); }),
      "the shard of 'wte' is I32 [8, 8] in manifest.json but F32 [8, 8] in " + model0);
  EXPECT_EQ(shardError(run, "step",
                       [](Json &m) { m.find("optimizer")->find("step")->set("dtype", "I32"); }),
            "the shard of 'step' is I32 [] in manifest.json but I64 [] in " + dir +
                "/optimizer-00000.safetensors");
  // A whole shape with shards to match, which the files do not hold.
  EXPECT_EQ(shardError(run, "wte",
                       [](Json &m) {
                         m.find("params")->find("wte")->set("shape", Json(Json::Array{8, 16}));
                         shardEntry(m, "params", "wte", 0).set("shape", Json(Json::Array{4, 16}));
                         shardEntry(m, "params", "wte", 1).set("shape", Json(Json::Array{4, 16}));
                         shardEntry(m, "params", "wte", 1).set("offset", Json(Json::Array{4, 0}));
                       }),
            "the shard of 'wte' is F32 [4, 16] in manifest.json but F32 [8, 8] in " + model0);
  EXPECT_EQ(
      shardError(run, "wpe",
                 [](Json &m) { m.find("params")->set("wpe", *m.find("params")->find("wte")); }),
      model0 + " lacks tensor 'wpe' that manifest.json lists");
  EXPECT_EQ(shardError(run, "wte",
                       [](Json &m) {
                         Json params = Json::object();
                         params.set("wte", *m.find("params")->find("wte"));
                         m.set("params", params);
                       }),
            model0 + " has tensor 'layers.0.wq' that manifest.json does not list");
  EXPECT_EQ(shardError(run, "wte",
                       [](Json &m) {
                         shardEntry(m, "params", "wte", 1)
                             .set("xxh3_chunks", Json(Json::Array{"0123456789abcdef"}));
                       }),
            model1 + ": tensor 'wte' does not match its checksum in manifest.json (the file is "
                     "corrupt)");
  // Shards that name each other's files: each file's block is not the one listed there.
  EXPECT_EQ(shardError(run, "wte",
                       [](Json &m) {
                         shardEntry(m, "params", "wte", 0).set("file", "model-00001.safetensors");
                         shardEntry(m, "params", "wte", 1).set("file", "model-00000.safetensors");
                       }),
            model1 + ": tensor 'wte' does not match its checksum in manifest.json (the file is "
                     "corrupt)");
}

TEST(Checkpoint, LoadRefusesShardsThatDoNotCoverTheTensor) {
  ScratchDir run;
  std::string manifest = run / "step_00000010/manifest.json";
  auto error = [&](auto edit) { return manifestError(run, edit); };
  // A rank's shard missing.
  EXPECT_EQ(
      error([](Json &m) { m.find("params")->find("wte")->find("shards")->items().pop_back(); }),
      manifest + ": 'params' tensor 'wte''s shards hold 64 of its 128 elements");
  EXPECT_EQ(error([](Json &m) { m.find("optimizer")->find("step")->set("shards", Json::array()); }),
            manifest + ": 'optimizer' tensor 'step''s shards hold 0 of its 1 elements");
  // A shard too few rows.
  EXPECT_EQ(
      error([](Json &m) {
        shardEntry(m, "optimizer", "layers.0.wq.v", 1).set("shape", Json(Json::Array{3, 2, 4}));
      }),
      manifest + ": 'optimizer' tensor 'layers.0.wq.v''s shards hold 56 of its 64 "
                 "elements");
  // Shards that overlap hold as many elements as the tensor but leave part of it out.
  EXPECT_EQ(error([](Json &m) {
              shardEntry(m, "params", "wte", 1).set("offset", Json(Json::Array{4, 0}));
            }),
            manifest + ": 'params' tensor 'wte' has shards that overlap");
  EXPECT_EQ(
      error([](Json &m) { shardEntry(m, "params", "wte", 1) = shardEntry(m, "params", "wte", 0); }),
      manifest + ": 'params' tensor 'wte' has shards that overlap");
  EXPECT_EQ(error([](Json &m) {
              Json &shards = *m.find("optimizer")->find("step")->find("shards");
              shards.push(shards.items()[0]);
            }),
            manifest + ": 'optimizer' tensor 'step' has shards that overlap");
}

TEST(Checkpoint, ReadBlockNamesAMissingShardFile) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run.path(), 10, error)) << error;
  std::string model1 = run / "step_00000010/model-00001.safetensors";
  fs::remove(model1);
  // The manifest loads: shard files are opened when a block needs them.
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(readError(*loaded, "wte"), "cannot open " + model1 + ": No such file or directory");
  std::vector<float> out(64);
  EXPECT_FALSE(loaded->readBlock("layers.0.wq", {6, 0, 0}, {1, 2, 4}, out.data(), error));
  EXPECT_EQ(error, "cannot open " + model1 + ": No such file or directory");
  // Blocks held by the other rank's file still read.
  EXPECT_EQ(readFloats(*loaded, "wte", {0, 0}, {8, 8}),
            std::vector<float>(state.wte.begin(), state.wte.begin() + 64));
  EXPECT_EQ(readWhole(*loaded, "wte.m"), state.m);
}

TEST(Checkpoint, CorruptFilesAreRefused) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run.path(), 10, error)) << error;
  std::string model = run / "step_00000010/model-00000.safetensors";
  std::string bytes = readFile(model);
  writeFile(model, bytes.substr(0, bytes.size() - 4));
  {
    auto loaded = loadCheckpoint(run.path(), error);
    ASSERT_TRUE(loaded) << error;
    EXPECT_EQ(readError(*loaded, "wte").rfind(model + ": ", 0), 0u);
  }
  writeFile(model, "not a safetensors file");
  {
    auto loaded = loadCheckpoint(run.path(), error);
    ASSERT_TRUE(loaded) << error;
    EXPECT_EQ(readError(*loaded, "layers.0.wq").rfind(model + ": ", 0), 0u);
  }
  writeFile(model, bytes);
  std::string manifest = run / "step_00000010/manifest.json";
  std::string goodManifest = readFile(manifest);
  writeFile(manifest, "{\"format\": \"tessel-checkpoint\",");
  EXPECT_EQ(loadError(run.path()),
            manifest + ": expected a string key, found the end of the input at byte 31");
  writeFile(manifest, goodManifest);
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(readWhole(*loaded, "wte"), state.wte);
}

} // namespace
