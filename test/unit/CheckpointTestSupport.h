//===- CheckpointTestSupport.h - A model's state and reads ------*- C++ -*-===//
//
// What the Checkpoint*Test.cpp files share: a small model's training state, saved by two ranks
// or one, and the reads of what a loaded checkpoint holds or refuses.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TEST_UNIT_CHECKPOINTTESTSUPPORT_H
#define TESSEL_TEST_UNIT_CHECKPOINTTESTSUPPORT_H

#include "runtime/checkpoint/Checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace tessel::test {

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

  rt::CheckpointContents contents(int64_t step) const {
    rt::CheckpointContents c;
    c.model = "tiny_gpt";
    c.fingerprint = "plan-0123abcd";
    c.step = step;
    c.extra = rt::Json::object();
    c.extra.set("lr", 3e-4);
    c.extra.set("rng", rt::Json(rt::Json::Array{uint64_t(1) << 62, 2, 3, 4}));
    c.extra.set("data", "train.bin");
    // Parameters in model order (not sorted), which the manifest keeps.
    c.params = {{"wte", rt::DType::F32, {16, 8}}, {"layers.0.wq", rt::DType::F32, {8, 2, 4}}};
    c.optimizerState = {{"wte.m", rt::DType::F32, {16, 8}},
                        {"layers.0.wq.v", rt::DType::F32, {8, 2, 4}},
                        {"step", rt::DType::I64, {}}};
    return c;
  }

  /// Two ranks, each holding half of every tensor along dim 0 (whose rows are contiguous, so
  /// the blocks borrow the whole tensors' memory); rank 0 also holds the optimizer's step.
  std::vector<rt::CheckpointShard> shards() const {
    std::vector<rt::CheckpointShard> s(2);
    for (uint32_t r = 0; r < 2; ++r) {
      const int64_t i = r;
      s[r].rank = r;
      s[r].params = {{"wte", rt::DType::F32, {8 * i, 0}, {8, 8}, wte.data() + 64 * i},
                     {"layers.0.wq", rt::DType::F32, {4 * i, 0, 0}, {4, 2, 4}, wq.data() + 32 * i}};
      s[r].optimizerState = {
          {"wte.m", rt::DType::F32, {8 * i, 0}, {8, 8}, m.data() + 64 * i},
          {"layers.0.wq.v", rt::DType::F32, {4 * i, 0, 0}, {4, 2, 4}, v.data() + 32 * i}};
    }
    s[0].optimizerState.push_back({"step", rt::DType::I64, {}, {}, &adamStep});
    return s;
  }

  /// One rank holding every tensor whole.
  std::vector<rt::CheckpointShard> oneRank() const {
    rt::CheckpointShard s;
    s.params = {{"wte", rt::DType::F32, {0, 0}, {16, 8}, wte.data()},
                {"layers.0.wq", rt::DType::F32, {0, 0, 0}, {8, 2, 4}, wq.data()}};
    s.optimizerState = {{"wte.m", rt::DType::F32, {0, 0}, {16, 8}, m.data()},
                        {"layers.0.wq.v", rt::DType::F32, {0, 0, 0}, {8, 2, 4}, v.data()},
                        {"step", rt::DType::I64, {}, {}, &adamStep}};
    return {s};
  }

  bool save(const std::string &dir, int64_t step, std::string &error) const {
    return rt::saveCheckpoint(dir, contents(step), shards(), error);
  }
};

/// Reads the block of F32 tensor `name` at `offset` of shape `shape`, and checks that the read
/// wrote nothing past it.
inline std::vector<float> readFloats(const rt::LoadedCheckpoint &checkpoint,
                                     const std::string &name, const std::vector<int64_t> &offset,
                                     const std::vector<int64_t> &shape) {
  constexpr float kGuard = -1234.5f;
  std::vector<float> out(static_cast<size_t>(rt::shapeElements(shape)) + 1, kGuard);
  std::string error;
  EXPECT_TRUE(checkpoint.readBlock(name, offset, shape, out.data(), error))
      << name << " at " << rt::formatShape(offset) << ": " << error;
  EXPECT_EQ(out.back(), kGuard) << name << ": the read wrote past its block";
  out.pop_back();
  return out;
}

/// The whole of F32 tensor `name`.
inline std::vector<float> readWhole(const rt::LoadedCheckpoint &checkpoint,
                                    const std::string &name) {
  const rt::StoredTensor *tensor = checkpoint.find(name);
  EXPECT_TRUE(tensor) << name;
  if (!tensor)
    return {};
  return readFloats(checkpoint, name, std::vector<int64_t>(tensor->shape.size(), 0), tensor->shape);
}

/// The error of reading the whole of tensor `name`.
inline std::string readError(const rt::LoadedCheckpoint &checkpoint, const std::string &name) {
  const rt::StoredTensor *tensor = checkpoint.find(name);
  EXPECT_TRUE(tensor) << name;
  if (!tensor)
    return "";
  std::vector<uint8_t> out(static_cast<size_t>(rt::shapeElements(tensor->shape) * 8));
  std::string error;
  EXPECT_FALSE(checkpoint.readBlock(name, std::vector<int64_t>(tensor->shape.size(), 0),
                                    tensor->shape, out.data(), error))
      << name;
  return error;
}

/// Names in `dir`, sorted.
inline std::set<std::string> listing(const std::string &dir) {
  std::set<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

inline std::string loadError(const std::string &path) {
  std::string error;
  EXPECT_FALSE(rt::loadCheckpoint(path, error)) << path;
  return error;
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_CHECKPOINTTESTSUPPORT_H
