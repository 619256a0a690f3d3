//===- CheckpointLoadTest.cpp - Tests of loading checkpoints --------------===//
//
// Finding a checkpoint from a run directory, reading blocks of its tensors in another split
// than they were saved in (resharding), reading only the chunks a slice needs, 16-bit tensors
// widened, older manifest versions, and whether a model fits a checkpoint.
//
//===----------------------------------------------------------------------===//

#include "common/support/Checksum.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "test/unit/CheckpointTestSupport.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace tessel::rt;
using namespace tessel::test;

namespace fs = std::filesystem;

namespace {

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

using ModelParams = std::vector<std::pair<std::string, std::vector<int64_t>>>;

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

} // namespace
