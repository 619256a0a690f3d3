//===- CheckpointSaveTest.cpp - Tests of saving checkpoints ---------------===//
//
// What a save writes (the files, the manifest, 'latest'), in one call or in the three steps of
// ranks in several processes; and that a failed or refused save leaves the previous checkpoint
// as it was.
//
//===----------------------------------------------------------------------===//

#include "common/support/Checksum.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/support/AtomicFile.h"
#include "test/unit/CheckpointTestSupport.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

using namespace tessel::rt;
using namespace tessel::test;

namespace fs = std::filesystem;

namespace {

const std::set<std::string> kTwoRankFiles = {
    "manifest.json", "model-00000.safetensors", "model-00001.safetensors",
    "optimizer-00000.safetensors", "optimizer-00001.safetensors"};

TEST(Checkpoint, SaveAndLoadRoundTrip) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run / "ckpt", 10, error)) << error;
  EXPECT_EQ(listing(run / "ckpt"), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(listing(run / "ckpt/step_00000010"), kTwoRankFiles);
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
    EXPECT_EQ(loaded->params.size(), 2u);
    EXPECT_EQ(loaded->optimizer.size(), 3u);
    EXPECT_FALSE(loaded->params.count("wte.m"));
    EXPECT_FALSE(loaded->optimizer.count("wte"));
    EXPECT_EQ(loaded->find("nope"), nullptr);

    // What the manifest says of each tensor and its shards.
    const StoredTensor *wq = loaded->find("layers.0.wq");
    ASSERT_TRUE(wq);
    EXPECT_EQ(wq, &loaded->params.at("layers.0.wq"));
    EXPECT_EQ(wq->dtype, DType::F32);
    EXPECT_EQ(wq->shape, (std::vector<int64_t>{8, 2, 4}));
    ASSERT_EQ(wq->shards.size(), 2u);
    EXPECT_EQ(wq->shards[0].file, "model-00000.safetensors");
    EXPECT_EQ(wq->shards[0].offset, (std::vector<int64_t>{0, 0, 0}));
    EXPECT_EQ(wq->shards[0].shape, (std::vector<int64_t>{4, 2, 4}));
    EXPECT_EQ(wq->shards[0].checksums.at(0),
              tessel::hex64(tessel::xxh3_64(state.wq.data(), 4 * 32)));
    EXPECT_EQ(wq->shards[1].file, "model-00001.safetensors");
    EXPECT_EQ(wq->shards[1].offset, (std::vector<int64_t>{4, 0, 0}));
    const StoredTensor *m = loaded->find("wte.m");
    ASSERT_TRUE(m);
    EXPECT_EQ(m, &loaded->optimizer.at("wte.m"));
    ASSERT_EQ(m->shards.size(), 2u);
    EXPECT_EQ(m->shards[1].file, "optimizer-00001.safetensors");
    EXPECT_EQ(m->shards[1].offset, (std::vector<int64_t>{8, 0}));

    // The values, whole.
    EXPECT_EQ(readWhole(*loaded, "wte"), state.wte);
    EXPECT_EQ(readWhole(*loaded, "layers.0.wq"), state.wq);
    EXPECT_EQ(readWhole(*loaded, "wte.m"), state.m);
    EXPECT_EQ(readWhole(*loaded, "layers.0.wq.v"), state.v);
    const StoredTensor *step = loaded->find("step");
    ASSERT_TRUE(step);
    EXPECT_EQ(step->dtype, DType::I64);
    EXPECT_EQ(step->shape, std::vector<int64_t>{});
    int64_t adamStep[2] = {0, -7};
    ASSERT_TRUE(loaded->readBlock("step", {}, {}, adamStep, error)) << error;
    EXPECT_EQ(adamStep[0], 42);
    EXPECT_EQ(adamStep[1], -7);
  }
}

TEST(Checkpoint, ManifestIsReadable) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run.path(), 300, error)) << error;
  std::string manifest = readFile(run / "step_00000300/manifest.json");
  EXPECT_EQ(manifest.rfind(R"({
  "format": "tessel-checkpoint",
  "version": 5,
  "model": "tiny_gpt",
  "fingerprint": "plan-0123abcd",
  "step": 300,)",
                           0),
            0u)
      << manifest;
  // Rank 1's half of 'layers.0.wq': its 32 floats from the 33rd on.
  std::string checksum1 = tessel::hex64(tessel::xxh3_64(state.wq.data() + 32, 4 * 32));
  EXPECT_NE(manifest.find(R"(    "layers.0.wq": {
      "dtype": "F32",
      "shape": [8, 2, 4],
      "shards": [
        {
          "file": "model-00000.safetensors",
          "offset": [0, 0, 0],
          "shape": [4, 2, 4],
          "xxh3_chunks": [")"),
            std::string::npos)
      << manifest;
  EXPECT_NE(manifest.find(R"(        {
          "file": "model-00001.safetensors",
          "offset": [4, 0, 0],
          "shape": [4, 2, 4],
          "xxh3_chunks": [")" +
                          checksum1 +
                          R"("]
        }
      ]
    })"),
            std::string::npos)
      << manifest;
  EXPECT_NE(manifest.find(R"(    "step": {
      "dtype": "I64",
      "shape": [],
      "shards": [
        {
          "file": "optimizer-00000.safetensors",
          "offset": [],
          "shape": [],)"),
            std::string::npos)
      << manifest;
  // The manifest's own checksum comes last.
  std::optional<Json> json = readJsonFile(run / "step_00000300/manifest.json", 1 << 30, error);
  ASSERT_TRUE(json) << error;
  ASSERT_FALSE(json->members().empty());
  EXPECT_EQ(json->members().back().first, "checksum");
  EXPECT_EQ(json->members().back().second, Json(manifestChecksum(*json, 5)));
  EXPECT_EQ(manifest.back(), '\n');
}

TEST(Checkpoint, LatestFollowsTheNewestSave) {
  ScratchDir run;
  std::string error;
  State first(1.0f), second(2.0f);
  ASSERT_TRUE(first.save(run.path(), 10, error)) << error;
  ASSERT_TRUE(second.save(run.path(), 20, error)) << error;
  EXPECT_EQ(readFile(run / "latest"), "step_00000020\n");
  auto latest = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(latest) << error;
  EXPECT_EQ(latest->step, 20);
  EXPECT_EQ(readWhole(*latest, "wte"), second.wte);
  // The older checkpoint stays loadable by its directory.
  auto older = loadCheckpoint(run / "step_00000010", error);
  ASSERT_TRUE(older) << error;
  EXPECT_EQ(readWhole(*older, "wte"), first.wte);
  EXPECT_EQ(listing(run.path()),
            (std::set<std::string>{"latest", "step_00000010", "step_00000020"}));
}

TEST(Checkpoint, SavingTheSameStepReplacesIt) {
  ScratchDir run;
  std::string error;
  State first(1.0f), second(5.0f);
  ASSERT_TRUE(first.save(run.path(), 10, error)) << error;
  // Saved again by one rank: the two ranks' files go with the checkpoint they belonged to.
  ASSERT_TRUE(saveCheckpoint(run.path(), second.contents(10), second.oneRank(), error)) << error;
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(readWhole(*loaded, "wte"), second.wte);
  EXPECT_EQ(readWhole(*loaded, "layers.0.wq.v"), second.v);
  EXPECT_EQ(loaded->find("wte")->shards.size(), 1u);
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(listing(run / "step_00000010"),
            (std::set<std::string>{"manifest.json", "model-00000.safetensors",
                                   "optimizer-00000.safetensors"}));
}

TEST(Checkpoint, FailedSaveLeavesThePreviousCheckpoint) {
  ScratchDir run;
  std::string error;
  State good(1.0f), bad(9.0f);
  ASSERT_TRUE(good.save(run.path(), 10, error)) << error;

  // Both model files and rank 0's optimizer file are written, then rank 1's optimizer file
  // fails: a block without data.
  std::vector<CheckpointShard> broken = bad.shards();
  ASSERT_EQ(broken[1].optimizerState[1].name, "layers.0.wq.v");
  broken[1].optimizerState[1].data = nullptr;
  EXPECT_FALSE(saveCheckpoint(run.path(), bad.contents(20), broken, error));
  EXPECT_EQ(error, "cannot save checkpoint " + (run / "step_00000020") + ": cannot write " +
                       (run / ".step_00000020" + tempSuffix()) +
                       "/optimizer-00001.safetensors: tensor 'layers.0.wq.v' has no data");
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(readFile(run / "latest"), "step_00000010\n");
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->step, 10);
  EXPECT_EQ(readWhole(*loaded, "wte"), good.wte);

  // The same failure while re-saving step 10 leaves step 10 as it was.
  EXPECT_FALSE(saveCheckpoint(run.path(), bad.contents(10), broken, error));
  loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(readWhole(*loaded, "wte"), good.wte);
  EXPECT_EQ(readWhole(*loaded, "layers.0.wq.v"), good.v);
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(listing(run / "step_00000010"), kTwoRankFiles);
}

TEST(Checkpoint, FailureToUpdateLatestKeepsTheOldLatest) {
  ScratchDir run;
  std::string error;
  State state(1.0f);
  ASSERT_TRUE(state.save(run.path(), 10, error)) << error;
  // A directory where latest's temporary file goes makes the update fail.
  fs::create_directory(run / ("latest" + tempSuffix()));
  writeFile(run / ("latest" + tempSuffix()) + "/x", "");
  EXPECT_FALSE(state.save(run.path(), 20, error));
  EXPECT_NE(error.find("checkpoint " + (run / "step_00000020") + " was saved but " + run.path() +
                       "/latest not updated: cannot create"),
            std::string::npos)
      << error;
  EXPECT_EQ(readFile(run / "latest"), "step_00000010\n");
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->step, 10);
  // The saved checkpoint itself is complete.
  auto saved = loadCheckpoint(run / "step_00000020", error);
  ASSERT_TRUE(saved) << error;
  EXPECT_EQ(readWhole(*saved, "wte"), state.wte);
}

TEST(Checkpoint, StaleTemporaryDirectoryIsReplaced) {
  ScratchDir run;
  std::string error;
  // A crashed earlier process with the same pid (common in containers) left its temp dir, with
  // a half-written shard and a shard of a rank this save does not have.
  std::string stale = run / (".step_00000010" + tempSuffix());
  EXPECT_EQ(stale, checkpointTempDir(run.path(), 10, std::to_string(::getpid())));
  fs::create_directories(stale);
  writeFile(stale + "/model-00000.safetensors", "half written");
  writeFile(stale + "/model-00007.safetensors", "another layout's");
  State state(1.0f);
  ASSERT_TRUE(state.save(run.path(), 10, error)) << error;
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(listing(run / "step_00000010"), kTwoRankFiles);
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(readWhole(*loaded, "wte"), state.wte);
}

TEST(Checkpoint, SaveErrors) {
  ScratchDir run;
  std::string error;
  State state(1.0f);
  writeFile(run / "file", "x");
  EXPECT_FALSE(state.save(run / "file", 1, error));
  EXPECT_EQ(error.rfind("cannot create checkpoint directory " + (run / "file") + ": ", 0), 0u)
      << error;
  EXPECT_FALSE(state.save(run.path(), -1, error));
  EXPECT_EQ(error, "cannot save a checkpoint for negative step -1");
  std::vector<CheckpointShard> duplicate = state.shards();
  duplicate[0].params.push_back(duplicate[0].params[0]);
  EXPECT_FALSE(saveCheckpoint(run.path(), state.contents(1), duplicate, error));
  EXPECT_NE(error.find("/model-00000.safetensors: tensor 'wte' appears twice"), std::string::npos)
      << error;
  EXPECT_TRUE(listing(run.path()) == std::set<std::string>{"file"});
}

TEST(Checkpoint, CommitRefusesShardsThatDoNotMakeUpATensor) {
  ScratchDir run;
  std::string error;
  State good(1.0f), bad(9.0f);
  ASSERT_TRUE(good.save(run.path(), 10, error)) << error;
  const std::string failed = "cannot save checkpoint " + (run / "step_00000020") + ": ";
  // Refused, with nothing left behind and the previous checkpoint still the latest.
  auto refused = [&](const std::vector<CheckpointShard> &shards, int64_t step = 20) {
    std::string why;
    EXPECT_FALSE(saveCheckpoint(run.path(), bad.contents(step), shards, why));
    EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
    EXPECT_EQ(listing(run / "step_00000010"), kTwoRankFiles);
    EXPECT_EQ(readFile(run / "latest"), "step_00000010\n");
    return why;
  };

  std::vector<CheckpointShard> shards = bad.shards();
  shards[1].params.erase(shards[1].params.begin());
  EXPECT_EQ(refused(shards), failed + "the ranks' shards of 'wte' hold 64 of its 128 elements");
  shards = bad.shards();
  shards[0].optimizerState.pop_back();
  EXPECT_EQ(refused(shards), failed + "the ranks' shards of 'step' hold 0 of its 1 elements");
  // Overlapping blocks that hold as many elements as the tensor but leave part of it out.
  shards = bad.shards();
  shards[1].params[0].offset = {4, 0};
  EXPECT_EQ(refused(shards), failed + "the block of 'wte' in model-00001.safetensors at [4, 0] of "
                                      "shape [8, 8] overlaps another block of it");
  shards = bad.shards();
  shards[1].optimizerState.push_back(shards[0].optimizerState.back());
  EXPECT_EQ(refused(shards), failed + "the block of 'step' in optimizer-00001.safetensors at [] of "
                                      "shape [] overlaps another block of it");
  // Blocks that do not fit their tensor.
  shards = bad.shards();
  shards[1].params[0].offset = {8, 4};
  EXPECT_EQ(refused(shards), failed + "the block of 'wte' in model-00001.safetensors at [8, 4] of "
                                      "shape [8, 8] does not fit in the tensor's shape [16, 8]");
  shards = bad.shards();
  shards[1].params[0].offset = {8};
  EXPECT_EQ(refused(shards), failed + "the block of 'wte' in model-00001.safetensors at [8] of "
                                      "shape [8, 8] does not fit in the tensor's shape [16, 8]");
  // A block of a tensor the checkpoint does not list would leave its file unreadable.
  shards = bad.shards();
  shards[0].params.push_back({"wpe", DType::F32, {0}, {4}, bad.wte.data()});
  EXPECT_EQ(refused(shards), failed +
                                 "the ranks wrote 'wpe' into model-00000.safetensors, which is "
                                 "not among the checkpoint's parameters");
  shards = bad.shards();
  shards[1].optimizerState.push_back({"wte", DType::F32, {8, 0}, {8, 8}, bad.m.data()});
  EXPECT_EQ(refused(shards), failed +
                                 "the ranks wrote 'wte' into optimizer-00001.safetensors, which "
                                 "is not among the checkpoint's optimizer state");

  // Re-saving step 10 that way leaves step 10 as it was.
  shards = bad.shards();
  shards[1].params.erase(shards[1].params.begin());
  refused(shards, 10);
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(readWhole(*loaded, "wte"), good.wte);

  // The same through the three steps: commitCheckpoint removes the shards written so far.
  const std::string temp = checkpointTempDir(run.path(), 20, "test");
  ASSERT_TRUE(beginCheckpoint(run.path(), 20, "test", error)) << error;
  Json description;
  ASSERT_TRUE(writeShard(temp, bad.shards()[0], description, error)) << error;
  EXPECT_FALSE(commitCheckpoint(run.path(), temp, bad.contents(20), {description}, error));
  EXPECT_EQ(error, failed + "the ranks' shards of 'wte' hold 64 of its 128 elements");
  EXPECT_EQ(listing(run.path()), (std::set<std::string>{"latest", "step_00000010"}));
  EXPECT_EQ(readFile(run / "latest"), "step_00000010\n");
}

TEST(Checkpoint, SavedInThreeStepsByRanksOfSeveralProcesses) {
  ScratchDir run;
  std::string error;
  State state(3.0f);
  // The first process makes the temporary directory.
  ASSERT_TRUE(beginCheckpoint(run / "ckpt/", 7, "4242", error)) << error;
  const std::string temp = checkpointTempDir(run / "ckpt/", 7, "4242");
  EXPECT_EQ(temp, run / "ckpt/.step_00000007.tmp-4242");
  EXPECT_EQ(listing(run / "ckpt"), (std::set<std::string>{".step_00000007.tmp-4242"}));
  // Each rank writes its shard; what they say of them travels to the first process as text.
  std::vector<Json> described;
  for (const CheckpointShard &shard : state.shards()) {
    Json description;
    ASSERT_TRUE(writeShard(temp, shard, description, error)) << error;
    std::optional<Json> received = Json::parse(description.compact(), "a description", error);
    ASSERT_TRUE(received) << error;
    described.push_back(*received);
  }
  const Json *wte = described[1].find("params")->find("wte");
  ASSERT_TRUE(wte);
  EXPECT_EQ(wte->find("file")->asString(), "model-00001.safetensors");
  EXPECT_EQ(*wte->find("offset"), Json(Json::Array{8, 0}));
  EXPECT_EQ(*wte->find("shape"), Json(Json::Array{8, 8}));
  ASSERT_TRUE(wte->find("xxh3_chunks") && wte->find("xxh3_chunks")->isArray());
  EXPECT_EQ(*wte->find("xxh3_chunks"),
            Json(Json::Array{tessel::hex64(tessel::xxh3_64(state.wte.data() + 64, 64 * 4))}));
  EXPECT_FALSE(described[1].find("optimizer")->find("step"));
  // Nothing is visible until the commit.
  EXPECT_EQ(listing(run / "ckpt"), (std::set<std::string>{".step_00000007.tmp-4242"}));
  ASSERT_TRUE(commitCheckpoint(run / "ckpt", temp, state.contents(7), described, error)) << error;
  EXPECT_EQ(listing(run / "ckpt"), (std::set<std::string>{"latest", "step_00000007"}));
  EXPECT_EQ(listing(run / "ckpt/step_00000007"), kTwoRankFiles);
  auto loaded = loadCheckpoint(run / "ckpt", error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->step, 7);
  EXPECT_EQ(readWhole(*loaded, "wte"), state.wte);
  EXPECT_EQ(readWhole(*loaded, "layers.0.wq.v"), state.v);

  // A rank without blocks of one kind writes no file for it.
  CheckpointShard paramsOnly;
  paramsOnly.rank = 3;
  paramsOnly.params = {{"wte", DType::F32, {0, 0}, {16, 8}, state.wte.data()}};
  ASSERT_TRUE(beginCheckpoint(run / "ckpt", 8, "4242", error)) << error;
  Json description;
  ASSERT_TRUE(
      writeShard(checkpointTempDir(run / "ckpt", 8, "4242"), paramsOnly, description, error))
      << error;
  EXPECT_EQ(description.find("optimizer")->size(), 0u);
  EXPECT_EQ(listing(checkpointTempDir(run / "ckpt", 8, "4242")),
            (std::set<std::string>{"model-00003.safetensors"}));
}

TEST(Checkpoint, Names) {
  EXPECT_EQ(checkpointName(300), "step_00000300");
  EXPECT_EQ(checkpointName(123456789), "step_123456789");
  EXPECT_EQ(checkpointTempDir("/runs/a/", 300, "77"), "/runs/a/.step_00000300.tmp-77");
  EXPECT_EQ(checkpointTempDir("/runs/a", 0, "77"), "/runs/a/.step_00000000.tmp-77");
}

} // namespace
