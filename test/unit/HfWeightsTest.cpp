//===- HfWeightsTest.cpp - Tests of reading a Hugging Face model folder ---===//

#include "common/support/Float16.h"
#include "runtime/checkpoint/HfWeights.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace tessel::rt;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace {

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

/// A folder with one model.safetensors: a fused [2, 6] matrix (GPT-2's c_attn: three [2, 2]
/// parts along the last dim), a [5, 3] position table, a BF16 [4] gain and an I32 tensor.
struct Folder {
  ScratchDir dir;
  std::vector<float> fused = iota(12), table = iota(15);
  std::vector<uint16_t> gain;
  std::vector<int32_t> ids = {1, 2};
  Folder() {
    for (float g : {1.0f, 0.5f, -2.0f, 3.0f})
      gain.push_back(tessel::floatToBf16(g));
    std::string error;
    EXPECT_TRUE(writeSafetensors(dir.path() + "/model.safetensors",
                                 {{"transformer.h.0.attn.c_attn.weight", DType::F32, {2, 6},
                                   fused.data()},
                                  {"transformer.wpe.weight", DType::F32, {5, 3}, table.data()},
                                  {"transformer.ln_f.weight", DType::BF16, {4}, gain.data()},
                                  {"ids", DType::I32, {2}, ids.data()}},
                                 {{"format", "pt"}}, error))
        << error;
  }
};

} // namespace

TEST(HfWeights, ReshapesSplitOrMergeButNeverReorder) {
  EXPECT_TRUE(reshapeCompatible({48, 16}, {3, 16, 16}));
  EXPECT_TRUE(reshapeCompatible({3, 16, 16}, {48, 16}));
  EXPECT_TRUE(reshapeCompatible({48}, {1, 3, 16}));
  EXPECT_TRUE(reshapeCompatible({6, 8}, {6, 8}));
  // As many elements, but a transpose or a regrouping.
  EXPECT_FALSE(reshapeCompatible({48, 88}, {88, 48}));
  EXPECT_FALSE(reshapeCompatible({6, 4}, {4, 6}));
  EXPECT_FALSE(reshapeCompatible({2, 6}, {3, 4}));
  EXPECT_FALSE(reshapeCompatible({12}, {13}));
}

TEST(HfWeights, ReadsPartsRowsAndWidens) {
  Folder f;
  ASSERT_TRUE(HfWeights::looksLike(f.dir.path()));
  std::string error;
  auto w = HfWeights::open(f.dir.path(), error);
  ASSERT_TRUE(w) << error;
  std::vector<float> out;
  // The middle third of each row of [[0..5], [6..11]]: k of q, k, v.
  ASSERT_TRUE(w->read("k", {2, 1, 2}, "transformer.h.0.attn.c_attn.weight", {1, 3, -1, -1}, out,
                      error))
      << error;
  EXPECT_EQ(out, (std::vector<float>{2, 3, 8, 9}));
  // The first 2 of 5 positions; the name without its base model's prefix.
  ASSERT_TRUE(w->read("wpe", {2, 3}, "wpe.weight", {0, 1, -1, 2}, out, error)) << error;
  EXPECT_EQ(out, (std::vector<float>{0, 1, 2, 3, 4, 5}));
  ASSERT_TRUE(w->read("g", {4}, "ln_f.weight", {}, out, error)) << error;
  EXPECT_EQ(out, (std::vector<float>{1.0f, 0.5f, -2.0f, 3.0f}));
}

TEST(HfWeights, RefusesWhatDoesNotFitNamingIt) {
  Folder f;
  std::string error;
  auto w = HfWeights::open(f.dir.path(), error);
  ASSERT_TRUE(w) << error;
  std::vector<float> out;
  EXPECT_FALSE(w->read("w", {6, 2}, "transformer.h.0.attn.c_attn.weight", {}, out, error));
  EXPECT_NE(error.find("parameter 'w' is [6, 2]"), std::string::npos) << error;
  EXPECT_NE(error.find("in another order"), std::string::npos) << error;
  EXPECT_FALSE(w->read("q", {2, 3}, "transformer.h.0.attn.c_attn.weight", {0, 4, -1, -1}, out,
                       error));
  EXPECT_NE(error.find("does not cut into that many equal parts"), std::string::npos) << error;
  EXPECT_FALSE(w->read("wpe", {6, 3}, "wpe.weight", {0, 1, -1, 6}, out, error));
  EXPECT_NE(error.find("loads the first 6 rows of 'transformer.wpe.weight'"), std::string::npos)
      << error;
  EXPECT_FALSE(w->read("x", {2}, "ids", {}, out, error));
  EXPECT_NE(error.find("I32"), std::string::npos) << error;
  EXPECT_FALSE(w->read("y", {4}, "h.0.mlp.c_fc.weight", {}, out, error));
  EXPECT_NE(error.find("does not hold"), std::string::npos) << error;
}

TEST(HfWeights, ChecksTheIndexAgainstItsShards) {
  Folder f;
  std::string error;
  writeFile(f.dir.path() + "/model.safetensors.index.json",
            R"({"metadata": {}, "weight_map": {"transformer.wpe.weight": "model.safetensors",
                "lm_head.weight": "model.safetensors"}})");
  EXPECT_FALSE(HfWeights::open(f.dir.path(), error));
  EXPECT_NE(error.find("'lm_head.weight' is not in"), std::string::npos) << error;
  writeFile(f.dir.path() + "/model.safetensors.index.json",
            R"({"weight_map": {"transformer.wpe.weight": "../elsewhere.safetensors"}})");
  EXPECT_FALSE(HfWeights::open(f.dir.path(), error));
  EXPECT_NE(error.find("no file name of this folder"), std::string::npos) << error;
  writeFile(f.dir.path() + "/model.safetensors.index.json",
            R"({"weight_map": {"transformer.wpe.weight": "model.safetensors"}})");
  auto w = HfWeights::open(f.dir.path(), error);
  ASSERT_TRUE(w) << error;
  EXPECT_EQ(w->names(), std::vector<std::string>{"transformer.wpe.weight"});
}
