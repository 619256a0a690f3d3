//===- CheckpointTest.cpp - Tests of checkpoint save, load and resume -----===//

#include "common/support/Checksum.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/AtomicFile.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
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
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = seed * 0.25f + float(i) / 8;
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = seed * 2 + float(i) / 4;
  }
  std::vector<float> wte = std::vector<float>(16 * 8);
  std::vector<float> wq = std::vector<float>(8 * 2 * 4);
  std::vector<float> m = std::vector<float>(16 * 8);
  std::vector<float> v = std::vector<float>(8 * 2 * 4);
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
    c.params = {{"wte", DType::F32, {16, 8}}, {"layers.0.wq", DType::F32, {8, 2, 4}}};
    c.optimizerState = {{"wte.m", DType::F32, {16, 8}},
                        {"layers.0.wq.v", DType::F32, {8, 2, 4}},
                        {"step", DType::I64, {}}};
    return c;
  }

  /// Two ranks, each holding half of every tensor along dim 0 (whose rows are contiguous, so
  /// the blocks borrow the whole tensors' memory); rank 0 also holds the optimizer's step.
  std::vector<CheckpointShard> shards() const {
    std::vector<CheckpointShard> s(2);
    for (uint32_t r = 0; r < 2; ++r) {
      const int64_t i = r;
      s[r].rank = r;
      s[r].params = {{"wte", DType::F32, {8 * i, 0}, {8, 8}, wte.data() + 64 * i},
                     {"layers.0.wq", DType::F32, {4 * i, 0, 0}, {4, 2, 4}, wq.data() + 32 * i}};
      s[r].optimizerState = {
          {"wte.m", DType::F32, {8 * i, 0}, {8, 8}, m.data() + 64 * i},
          {"layers.0.wq.v", DType::F32, {4 * i, 0, 0}, {4, 2, 4}, v.data() + 32 * i}};
    }
    s[0].optimizerState.push_back({"step", DType::I64, {}, {}, &adamStep});
    return s;
  }

  /// One rank holding every tensor whole.
  std::vector<CheckpointShard> oneRank() const {
    CheckpointShard s;
    s.params = {{"wte", DType::F32, {0, 0}, {16, 8}, wte.data()},
                {"layers.0.wq", DType::F32, {0, 0, 0}, {8, 2, 4}, wq.data()}};
    s.optimizerState = {{"wte.m", DType::F32, {0, 0}, {16, 8}, m.data()},
                        {"layers.0.wq.v", DType::F32, {0, 0, 0}, {8, 2, 4}, v.data()},
                        {"step", DType::I64, {}, {}, &adamStep}};
    return {s};
  }

  bool save(const std::string &dir, int64_t step, std::string &error) const {
    return saveCheckpoint(dir, contents(step), shards(), error);
  }
};

/// The block of `whole` (row-major, of shape `wholeShape`) at `offset` with shape `shape`,
/// cut here without the runtime's help.
template <typename T>
std::vector<T> blockOf(const std::vector<T> &whole, const std::vector<int64_t> &wholeShape,
                       const std::vector<int64_t> &offset, const std::vector<int64_t> &shape) {
  std::vector<T> out;
  std::vector<int64_t> at(shape.size());
  for (int64_t i = 0; i < shapeElements(shape); ++i) {
    int64_t rest = i;
    for (size_t d = shape.size(); d-- > 0;) {
      at[d] = rest % shape[d];
      rest /= shape[d];
    }
    int64_t index = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      index = index * wholeShape[d] + offset[d] + at[d];
    out.push_back(whole[static_cast<size_t>(index)]);
  }
  return out;
}

/// Reads the block of F32 tensor `name` at `offset` of shape `shape`, and checks that the read
/// wrote nothing past it.
std::vector<float> readFloats(const LoadedCheckpoint &checkpoint, const std::string &name,
                              const std::vector<int64_t> &offset,
                              const std::vector<int64_t> &shape) {
  constexpr float kGuard = -1234.5f;
  std::vector<float> out(static_cast<size_t>(shapeElements(shape)) + 1, kGuard);
  std::string error;
  EXPECT_TRUE(checkpoint.readBlock(name, offset, shape, out.data(), error))
      << name << " at " << formatShape(offset) << ": " << error;
  EXPECT_EQ(out.back(), kGuard) << name << ": the read wrote past its block";
  out.pop_back();
  return out;
}

/// The whole of F32 tensor `name`.
std::vector<float> readWhole(const LoadedCheckpoint &checkpoint, const std::string &name) {
  const StoredTensor *tensor = checkpoint.find(name);
  EXPECT_TRUE(tensor) << name;
  if (!tensor)
    return {};
  return readFloats(checkpoint, name, std::vector<int64_t>(tensor->shape.size(), 0), tensor->shape);
}

/// The error of reading the whole of tensor `name`.
std::string readError(const LoadedCheckpoint &checkpoint, const std::string &name) {
  const StoredTensor *tensor = checkpoint.find(name);
  EXPECT_TRUE(tensor) << name;
  if (!tensor)
    return "";
  std::vector<uint8_t> out(static_cast<size_t>(shapeElements(tensor->shape) * 8));
  std::string error;
  EXPECT_FALSE(checkpoint.readBlock(name, std::vector<int64_t>(tensor->shape.size(), 0),
                                    tensor->shape, out.data(), error))
      << name;
  return error;
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

const std::set<std::string> kTwoRankFiles = {
    "manifest.json", "model-00000.safetensors", "model-00001.safetensors",
    "optimizer-00000.safetensors", "optimizer-00001.safetensors"};

using ModelParams = std::vector<std::pair<std::string, std::vector<int64_t>>>;

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
    EXPECT_EQ(wq->shards[0].checksums.at(0), tessel::hex64(tessel::xxh3_64(state.wq.data(), 4 * 32)));
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
          "xxh3_chunks": [")" + checksum1 +
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

// Version 5 checksums each shard in 1 MiB chunks: a load that needs a slice of a shard reads
// and checks only the chunks under it, so a process resharding a large checkpoint reads its
// part, not every overlapping shard whole; a corrupt chunk is still refused where it is read.
TEST(Checkpoint, ReadingASliceChecksOnlyItsChunks) {
  ScratchDir run;
  std::string error;
  const int64_t rows = 1024, cols = 1024; // 4 MiB of F32: four chunks of 256 rows.
  std::vector<float> big(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<float>(i % 9973) * 0.5f;
  CheckpointContents contents;
  contents.model = "big";
  contents.step = 1;
  contents.extra = Json::object();
  contents.params = {{"big", DType::F32, {rows, cols}}};
  CheckpointShard shard;
  shard.params = {{"big", DType::F32, {0, 0}, {rows, cols}, big.data()}};
  ASSERT_TRUE(saveCheckpoint(run.path(), contents, {shard}, error)) << error;

  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  ASSERT_EQ(loaded->params.at("big").shards[0].checksums.size(), 4u);
  // A rank of four along dim 0: one chunk read and checked.
  std::vector<float> quarter(static_cast<size_t>(rows * cols / 4));
  ASSERT_TRUE(loaded->readBlock("big", {256, 0}, {256, cols}, quarter.data(), error)) << error;
  EXPECT_TRUE(std::equal(quarter.begin(), quarter.end(), big.begin() + 256 * cols));
  EXPECT_EQ(loaded->bytesChecked(), uint64_t(1) << 20);
  // A rank of four along dim 1 reads a strip of every row: every chunk.
  std::vector<float> strip(static_cast<size_t>(rows * cols / 4));
  ASSERT_TRUE(loaded->readBlock("big", {0, 512}, {rows, 256}, strip.data(), error)) << error;
  EXPECT_EQ(strip[1], big[513]);
  EXPECT_EQ(loaded->bytesChecked(), uint64_t(4) << 20);

  // A damaged byte in the last chunk: the first quarter still reads, the last is refused.
  const std::string file = run / "step_00000001/model-00000.safetensors";
  std::string bytes = readFile(file);
  bytes[bytes.size() - 5] ^= 0x40;
  writeFile(file, bytes);
  loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  ASSERT_TRUE(loaded->readBlock("big", {0, 0}, {256, cols}, quarter.data(), error)) << error;
  EXPECT_FALSE(loaded->readBlock("big", {768, 0}, {256, cols}, quarter.data(), error));
  EXPECT_EQ(error, file + ": tensor 'big' does not match its checksum in manifest.json (the file "
                         "is corrupt, in bytes 3145728 to 4194304 of its data)");
}

// BF16 and F16 tensors, as pretrained weights are published, read widened to F32.
TEST(Checkpoint, SixteenBitTensorsReadWidened) {
  ScratchDir run;
  std::string error;
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x0000, 0x7f80}; // 1, -3, 0, inf
  const std::vector<uint16_t> f16 = {0x3c00, 0xc200, 0x3555, 0x7bff};  // 1, -3, ~1/3, 65504
  CheckpointContents contents;
  contents.model = "halves";
  contents.step = 2;
  contents.extra = Json::object();
  contents.params = {{"b", DType::BF16, {2, 2}}, {"h", DType::F16, {4}}};
  CheckpointShard shard;
  shard.params = {{"b", DType::BF16, {0, 0}, {2, 2}, bf16.data()},
                  {"h", DType::F16, {0}, {4}, f16.data()}};
  ASSERT_TRUE(saveCheckpoint(run.path(), contents, {shard}, error)) << error;
  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  EXPECT_EQ(loaded->params.at("b").dtype, DType::BF16);
  std::vector<float> b(4), h(2);
  ASSERT_TRUE(loaded->readBlock("b", {0, 0}, {2, 2}, b.data(), error)) << error;
  EXPECT_EQ(b, (std::vector<float>{1.0f, -3.0f, 0.0f, std::numeric_limits<float>::infinity()}));
  ASSERT_TRUE(loaded->readBlock("h", {2}, {2}, h.data(), error)) << error;
  EXPECT_FLOAT_EQ(h[0], 0.333251953125f);
  EXPECT_EQ(h[1], 65504.0f);
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

TEST(Checkpoint, ReadsVersions3And4ThatChecksummedEachShardWhole) {
  // Version 5 checksums a shard in chunks; version 4 did it whole with XXH3, version 3 with
  // FNV-1a. Checkpoints written as either still load and read, and their shards are checked.
  for (int64_t version : {3, 4}) {
    SCOPED_TRACE("version " + std::to_string(version));
    ScratchDir run;
    State state(1.0f);
    std::string error;
    ASSERT_TRUE(state.save(run.path(), 10, error)) << error;
    const std::string dir = run / "step_00000010", path = dir + "/manifest.json";
    std::optional<Json> manifest = readJsonFile(path, 1 << 30, error);
    ASSERT_TRUE(manifest) << error;
    manifest->set("version", version);
    for (const char *kind : {"params", "optimizer"}) {
      std::vector<std::string> names;
      for (const auto &member : manifest->find(kind)->members())
        names.push_back(member.first);
      for (const std::string &name : names)
        for (Json &shard : manifest->find(kind)->find(name)->find("shards")->items()) {
          auto contents = readSafetensors(dir + "/" + shard.find("file")->asString(), error);
          ASSERT_TRUE(contents) << error;
          const SafetensorsTensor *t = contents->find(name);
          ASSERT_TRUE(t) << name;
          Json old = Json::object();
          for (const auto &[key, value] : shard.members())
            if (key != "xxh3_chunks")
              old.set(key, value);
          if (version == 3)
            old.set("fnv1a64", tessel::hex64(tessel::fnv1a64(t->bytes.data(), t->bytes.size())));
          else
            old.set("xxh3", tessel::hex64(tessel::xxh3_64(t->bytes.data(), t->bytes.size())));
          shard = old;
        }
    }
    manifest->set("checksum", manifestChecksum(*manifest, version));
    writeFile(path, manifest->pretty());
    auto loaded = loadCheckpoint(run.path(), error);
    ASSERT_TRUE(loaded) << error;
    EXPECT_EQ(readFloats(*loaded, "wte", {0, 0}, {16, 8}), state.wte);
    // The whole shard is checked at its first read.
    EXPECT_EQ(loaded->bytesChecked(), 16u * 8 * 4);
    // A manifest checksum of another version does not pass.
    manifest->set("checksum", manifestChecksum(*manifest, version == 3 ? 4 : 3));
    writeFile(path, manifest->pretty());
    EXPECT_EQ(loadError(run.path()),
              path + ": does not match its checksum (it was edited or is corrupt)");
  }
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

TEST(Checkpoint, LoadingReshards) {
  ScratchDir run;
  std::string error;
  // Whole tensors, with distinct values everywhere.
  const std::vector<int64_t> wShape = {6, 4}, xShape = {4, 3, 5};
  std::vector<float> w(24), wm(24), x(60);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = float(i) * 0.5f - 3;
    wm[i] = float(i) * -0.25f;
  }
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 100 + float(i);
  int64_t step = int64_t(123456789) << 8;

  CheckpointContents contents;
  contents.model = "resharded";
  contents.step = 3;
  contents.extra = Json::object();
  contents.params = {{"w", DType::F32, wShape}, {"x", DType::F32, xShape}};
  contents.optimizerState = {{"w.m", DType::F32, wShape}, {"step", DType::I64, {}}};

  // Three ranks: 'w' split unevenly on dim 0 between ranks 0 and 1; 'x' in three blocks, split
  // on dims 0 and 2; 'w.m' whole on rank 2; 'step' on rank 1.
  std::deque<std::vector<float>> storage;
  auto cut = [&](const std::string &name, const std::vector<float> &whole,
                 const std::vector<int64_t> &shape, std::vector<int64_t> offset,
                 std::vector<int64_t> blockShape) {
    storage.push_back(blockOf(whole, shape, offset, blockShape));
    return TensorBlock{name, DType::F32, offset, blockShape, storage.back().data()};
  };
  std::vector<CheckpointShard> shards(3);
  for (uint32_t r = 0; r < 3; ++r)
    shards[r].rank = r;
  shards[0].params = {cut("w", w, wShape, {0, 0}, {2, 4}),
                      cut("x", x, xShape, {0, 0, 0}, {2, 3, 3})};
  shards[1].params = {cut("w", w, wShape, {2, 0}, {4, 4}),
                      cut("x", x, xShape, {0, 0, 3}, {2, 3, 2})};
  shards[2].params = {cut("x", x, xShape, {2, 0, 0}, {2, 3, 5})};
  shards[1].optimizerState = {{"step", DType::I64, {}, {}, &step}};
  shards[2].optimizerState = {cut("w.m", wm, wShape, {0, 0}, wShape)};
  ASSERT_TRUE(saveCheckpoint(run.path(), contents, shards, error)) << error;
  EXPECT_EQ(listing(run / "step_00000003"),
            (std::set<std::string>{"manifest.json", "model-00000.safetensors",
                                   "model-00001.safetensors", "model-00002.safetensors",
                                   "optimizer-00001.safetensors", "optimizer-00002.safetensors"}));

  auto loaded = loadCheckpoint(run.path(), error);
  ASSERT_TRUE(loaded) << error;
  const StoredTensor *stored = loaded->find("x");
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->shards.size(), 3u);
  EXPECT_EQ(stored->shards[1].file, "model-00001.safetensors");
  EXPECT_EQ(stored->shards[1].offset, (std::vector<int64_t>{0, 0, 3}));
  EXPECT_EQ(stored->shards[1].shape, (std::vector<int64_t>{2, 3, 2}));

  // Reads a block of a whole tensor and compares it with the same block cut here.
  auto expectBlock = [&](const std::string &name, const std::vector<float> &whole,
                         const std::vector<int64_t> &shape, const std::vector<int64_t> &offset,
                         const std::vector<int64_t> &blockShape) {
    EXPECT_EQ(readFloats(*loaded, name, offset, blockShape),
              blockOf(whole, shape, offset, blockShape))
        << name << " at " << formatShape(offset) << " of shape " << formatShape(blockShape);
  };

  // 'w', saved split on dim 0 into 2 and 4 rows: whole, split on dim 1, in four blocks, in
  // blocks that straddle the saved split, one element and no elements.
  EXPECT_EQ(readWhole(*loaded, "w"), w);
  expectBlock("w", w, wShape, {0, 0}, {6, 2});
  expectBlock("w", w, wShape, {0, 2}, {6, 2});
  for (int64_t i : {0, 3})
    for (int64_t j : {0, 2})
      expectBlock("w", w, wShape, {i, j}, {3, 2});
  expectBlock("w", w, wShape, {1, 1}, {3, 2});
  expectBlock("w", w, wShape, {5, 3}, {1, 1});
  expectBlock("w", w, wShape, {2, 0}, {0, 4});
  // 'x', saved in three blocks: whole, split on dim 1, on dim 2 into single columns, on dim 0
  // into single slices, and a block inside that all three saved blocks hold part of.
  EXPECT_EQ(readWhole(*loaded, "x"), x);
  expectBlock("x", x, xShape, {0, 0, 0}, {4, 1, 5});
  expectBlock("x", x, xShape, {0, 1, 0}, {4, 2, 5});
  for (int64_t k = 0; k < 5; ++k)
    expectBlock("x", x, xShape, {0, 0, k}, {4, 3, 1});
  for (int64_t i = 0; i < 4; ++i)
    expectBlock("x", x, xShape, {i, 0, 0}, {1, 3, 5});
  expectBlock("x", x, xShape, {1, 1, 2}, {2, 2, 2});
  // 'w.m', saved whole: in two blocks.
  EXPECT_EQ(readWhole(*loaded, "w.m"), wm);
  expectBlock("w.m", wm, wShape, {0, 0}, {6, 2});
  expectBlock("w.m", wm, wShape, {3, 0}, {3, 4});
  // The scalar.
  int64_t readStep[2] = {0, -1};
  ASSERT_TRUE(loaded->readBlock("step", {}, {}, readStep, error)) << error;
  EXPECT_EQ(readStep[0], step);
  EXPECT_EQ(readStep[1], -1);

  // Blocks that cannot be read.
  std::vector<float> out(64);
  EXPECT_FALSE(loaded->readBlock("nope", {0}, {1}, out.data(), error));
  EXPECT_EQ(error, "checkpoint " + (run / "step_00000003") + " lacks 'nope'");
  EXPECT_FALSE(loaded->readBlock("w", {0}, {6}, out.data(), error));
  EXPECT_EQ(error, "checkpoint " + (run / "step_00000003") + ": 'w' is [6, 4]");
  EXPECT_FALSE(loaded->readBlock("w", {4, 0}, {4, 4}, out.data(), error));
  EXPECT_EQ(error, "checkpoint " + (run / "step_00000003") +
                       ": the shards of 'w' do not cover the block at [4, 0] of shape [4, 4]");
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

TEST(Checkpoint, CompatibilityMessagesNameTheMismatch) {
  ScratchDir run;
  State state(1.0f);
  std::string error;
  ASSERT_TRUE(state.save(run / "x", 10, error)) << error;
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

  // Optimizer state is not a parameter.
  ModelParams optimizerName = {{"wte", {16, 8}}, {"layers.0.wq", {8, 2, 4}}, {"wte.m", {16, 8}}};
  EXPECT_FALSE(checkCompatible(*loaded, optimizerName, "tiny_gpt", error));
  EXPECT_EQ(error, "the model has parameter 'wte.m' that the checkpoint lacks");

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
  EXPECT_EQ(checkpointTempDir("/runs/a/", 300, "77"), "/runs/a/.step_00000300.tmp-77");
  EXPECT_EQ(checkpointTempDir("/runs/a", 0, "77"), "/runs/a/.step_00000000.tmp-77");
}

} // namespace
