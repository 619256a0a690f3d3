//===- SafetensorsTest.cpp - Tests of the safetensors reader and writer ----===//

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/support/Json.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sys/stat.h>

using namespace tessel::rt;
using tessel::test::readFile;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace {

/// Tensors of every dtype, a scalar and an empty one, in unsorted order.
struct Sample {
  std::vector<float> wte = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};
  std::vector<float> bias = {0.5f, 0.25f, 0.125f};
  int64_t step = 1234567890123LL;
  std::vector<uint8_t> mask = {0, 1, 255, 7, 9};
  std::vector<int32_t> ids = {-1, 2, 2147483647, -2147483647 - 1};

  std::vector<TensorView> views() const {
    return {
        {"wte", DType::F32, {2, 3}, wte.data()}, {"bias", DType::F32, {3}, bias.data()},
        {"step", DType::I64, {}, &step},         {"mask", DType::U8, {5}, mask.data()},
        {"ids", DType::I32, {2, 2}, ids.data()}, {"empty", DType::F32, {0, 4}, nullptr},
    };
  }
};

std::vector<uint8_t> bytesOf(const void *data, size_t size) {
  const auto *bytes = static_cast<const uint8_t *>(data);
  return std::vector<uint8_t>(bytes, bytes + size);
}

/// A safetensors file from a header text and data bytes, no validation.
std::string rawFile(const std::string &header, const std::string &data) {
  std::string bytes;
  for (int i = 0; i < 8; ++i)
    bytes += static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return bytes + header + data;
}

std::string readError(const std::string &path) {
  std::string error;
  auto file = readSafetensors(path, error);
  EXPECT_FALSE(file) << "accepted " << path;
  EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << "the error must name the file: " << error;
  return error;
}

TEST(Safetensors, RoundTrip) {
  ScratchDir dir;
  Sample sample;
  std::string error;
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"model", "tiny_gpt"}};
  ASSERT_TRUE(writeSafetensors(dir / "a.safetensors", sample.views(), metadata, error)) << error;

  auto file = readSafetensors(dir / "a.safetensors", error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->path, dir / "a.safetensors");
  EXPECT_EQ(file->metadata, metadata);
  ASSERT_EQ(file->tensors.size(), 6u);
  for (const TensorView &view : sample.views()) {
    const SafetensorsTensor *tensor = file->find(view.name);
    ASSERT_TRUE(tensor) << view.name;
    EXPECT_EQ(tensor->dtype, view.dtype) << view.name;
    EXPECT_EQ(tensor->shape, view.shape) << view.name;
    size_t bytes = size_t(shapeElements(view.shape) * dtypeSize(view.dtype));
    EXPECT_EQ(std::vector<uint8_t>(tensor->bytes.begin(), tensor->bytes.end()),
              bytesOf(view.data, bytes))
        << view.name;
  }
  EXPECT_EQ(file->find("missing"), nullptr);
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST(Safetensors, LayoutFollowsTheFormat) {
  ScratchDir dir;
  Sample sample;
  std::string error;
  ASSERT_TRUE(writeSafetensors(dir / "a.safetensors", sample.views(), {{"k", "v"}}, error));
  std::string bytes = readFile(dir / "a.safetensors");
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ(headerBytes % 8, 0u);
  std::string header = bytes.substr(8, headerBytes);
  EXPECT_EQ(header[0], '{');
  std::optional<Json> json = Json::parse(header, "header", error);
  ASSERT_TRUE(json) << error;
  // Tensors sorted by name, contiguous in that order from offset 0 to the end of the file.
  std::vector<std::string> names;
  int64_t offset = 0;
  for (const auto &[name, entry] : json->members()) {
    if (name == "__metadata__")
      continue;
    names.push_back(name);
    EXPECT_EQ(entry.find("data_offsets")->items()[0].asInt(), offset) << name;
    offset = entry.find("data_offsets")->items()[1].asInt();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"bias", "empty", "ids", "mask", "step", "wte"}));
  EXPECT_EQ(uint64_t(offset), bytes.size() - 8 - headerBytes);
  // The first tensor's data follows the header: bias = 0.5f, little-endian.
  float first;
  std::memcpy(&first, bytes.data() + 8 + headerBytes, 4);
  EXPECT_EQ(first, 0.5f);
  EXPECT_EQ(json->find("__metadata__")->compact(), R"({"k":"v"})");
}

TEST(Safetensors, NoTensorsAndNoMetadata) {
  ScratchDir dir;
  std::string error;
  ASSERT_TRUE(writeSafetensors(dir / "e.safetensors", {}, {}, error)) << error;
  auto file = readSafetensors(dir / "e.safetensors", error);
  ASSERT_TRUE(file) << error;
  EXPECT_TRUE(file->tensors.empty());
  EXPECT_TRUE(file->metadata.empty());
}

TEST(Safetensors, WriterRefusesBadTensors) {
  ScratchDir dir;
  std::string path = dir / "w.safetensors";
  float data[4] = {};
  auto refused = [&](std::vector<TensorView> tensors) {
    std::string error;
    EXPECT_FALSE(writeSafetensors(path, tensors, {}, error));
    EXPECT_FALSE(std::filesystem::exists(path));
    return error;
  };
  EXPECT_EQ(refused({{"a", DType::F32, {2}, data}, {"a", DType::F32, {2}, data}}),
            "cannot write " + path + ": tensor 'a' appears twice");
  EXPECT_EQ(refused({{"", DType::F32, {2}, data}}),
            "cannot write " + path + ": tensor '' has an empty name");
  EXPECT_EQ(refused({{"__metadata__", DType::F32, {2}, data}}),
            "cannot write " + path + ": tensor '__metadata__' has a reserved name");
  EXPECT_EQ(refused({{"a", DType::F32, {2, -1}, data}}),
            "cannot write " + path + ": tensor 'a' has an invalid shape [2, -1]");
  EXPECT_EQ(refused({{"a", DType::F32, {2}, nullptr}}),
            "cannot write " + path + ": tensor 'a' has no data");
  EXPECT_EQ(refused({{"a", DType::I64, {int64_t(1) << 40, int64_t(1) << 40}, data}}),
            "cannot write " + path +
                ": tensor 'a' has an invalid shape [1099511627776, "
                "1099511627776]");
}

TEST(Safetensors, WriterReplacesAnExistingFile) {
  ScratchDir dir;
  std::string path = dir / "w.safetensors";
  writeFile(path, "old contents");
  float value = 2.0f;
  std::string error;
  ASSERT_TRUE(writeSafetensors(path, {{"x", DType::F32, {1}, &value}}, {}, error)) << error;
  auto file = readSafetensors(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->tensors.size(), 1u);
}

TEST(Safetensors, EveryTruncationIsRefused) {
  ScratchDir dir;
  Sample sample;
  std::string error;
  ASSERT_TRUE(writeSafetensors(dir / "good.safetensors", sample.views(), {}, error));
  std::string bytes = readFile(dir / "good.safetensors");
  std::string path = dir / "cut.safetensors";
  for (size_t length = 0; length < bytes.size(); ++length) {
    writeFile(path, bytes.substr(0, length));
    std::string why = readError(path);
    if (length < 8) {
      EXPECT_EQ(why, path + ": truncated: " + std::to_string(length) +
                         " bytes, too short for the 8-byte header length");
    }
  }
  // A cut in the data region names the tensor that runs past the end.
  writeFile(path, bytes.substr(0, bytes.size() - 1));
  EXPECT_EQ(readError(path), path + ": tensor 'wte' has data_offsets [41, 65] beyond the 64 "
                                    "bytes of data (is the file truncated?)");
}

TEST(Safetensors, TrailingBytesAreRefused) {
  ScratchDir dir;
  Sample sample;
  std::string error;
  ASSERT_TRUE(writeSafetensors(dir / "good.safetensors", sample.views(), {}, error));
  std::string path = dir / "long.safetensors";
  writeFile(path, readFile(dir / "good.safetensors") + "xyz");
  EXPECT_EQ(readError(path), path + ": 3 bytes of trailing data after the last tensor");
}

TEST(Safetensors, HeaderLengthBeyondTheFile) {
  ScratchDir dir;
  std::string path = dir / "x.safetensors";
  std::string bytes = rawFile("{}      ", "");
  bytes[0] = 9; // one byte more than there is
  writeFile(path, bytes);
  EXPECT_EQ(readError(path), path + ": header length 9 runs past the end of the 16-byte file "
                                    "(truncated or not safetensors)");
  bytes = rawFile("{}", "");
  std::memset(&bytes[0], 0xff, 8);
  writeFile(path, bytes);
  EXPECT_NE(readError(path).find("header length 18446744073709551615 runs past the end"),
            std::string::npos);
}

TEST(Safetensors, FlippedHeaderBytes) {
  ScratchDir dir;
  Sample sample;
  std::string error;
  ASSERT_TRUE(writeSafetensors(dir / "good.safetensors", sample.views(), {{"k", "v"}}, error));
  std::string good = readFile(dir / "good.safetensors");
  uint64_t headerBytes = uint8_t(good[0]) | uint64_t(uint8_t(good[1])) << 8;
  std::string path = dir / "flipped.safetensors";
  // Every single-bit flip in the length or the header is either refused or changes only a
  // name (no checksum can catch "wte" -> "wtd"); the reader never crashes or misreads data.
  int refused = 0, total = 0;
  for (size_t at = 0; at < 8 + headerBytes; ++at) {
    for (int bit : {0, 3, 7}) {
      std::string bytes = good;
      bytes[at] = char(bytes[at] ^ (1 << bit));
      writeFile(path, bytes);
      ++total;
      auto file = readSafetensors(path, error);
      if (!file) {
        ++refused;
        EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
        continue;
      }
      int64_t dataBytes = 0;
      for (const auto &entry : file->tensors)
        dataBytes += int64_t(entry.second.bytes.size());
      EXPECT_EQ(dataBytes, 65) << "flip at byte " << at;
    }
  }
  EXPECT_GT(refused, total * 3 / 4);

  // Flips that must be refused, with their reasons.
  auto flipped = [&](const std::string &from, const std::string &to) {
    std::string bytes = good;
    size_t at = bytes.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    bytes.replace(at, from.size(), to);
    writeFile(path, bytes);
    return readError(path);
  };
  EXPECT_EQ(flipped("{\"__", "[\"__"),
            path + ": invalid JSON header: expected ',' or ']' at byte 15");
  EXPECT_EQ(flipped("\"F32\"", "\"F64\""),
            path + ": tensor 'bias' has unknown dtype 'F64' (supported: F32, I32, I64, U8, BF16, "
                   "F16)");
  // A 16-bit float is read, and its bytes must match its size.
  EXPECT_EQ(flipped("\"F32\"", "\"F16\""),
            path + ": tensor 'bias' has data_offsets [0, 12] (12 bytes) but F16 [3] needs 6 bytes");
  EXPECT_EQ(flipped("\"shape\":[3]", "\"shape\":[4]"),
            path + ": tensor 'bias' has data_offsets [0, 12] (12 bytes) but F32 [4] needs 16 "
                   "bytes");
  EXPECT_EQ(flipped("\"ids\"", "\"wte\""), path + ": invalid JSON header: duplicate key 'wte' "
                                                  "at byte 317");
}

TEST(Safetensors, MalformedHeadersAreRefused) {
  ScratchDir dir;
  std::string path = dir / "bad.safetensors";
  std::string data(24, '\0');
  auto refused = [&](const std::string &header, const std::string &payload) {
    writeFile(path, rawFile(header, payload));
    return readError(path);
  };
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string b16 = R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]})";

  std::string error;
  writeFile(path, rawFile("{" + a + "," + b16 + "}  ", data));
  EXPECT_TRUE(readSafetensors(path, error)) << error; // the well-formed baseline
  writeFile(path, rawFile("{}", ""));
  EXPECT_TRUE(readSafetensors(path, error)) << error;

  EXPECT_EQ(refused("", ""),
            path + ": invalid JSON header: expected a value, found the end of the input at byte 0");
  EXPECT_EQ(refused("[]", ""), path + ": the header is not a JSON object");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", data),
            path + ": tensor 'a' has unknown dtype 'F8_E4M3' (supported: F32, I32, I64, U8, "
                   "BF16, F16)");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}})",
                    data.substr(0, 20)),
            path + ": tensors 'a' and 'b' overlap");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                    data.substr(0, 8)),
            path + ": tensors 'a' and 'b' overlap");
  EXPECT_EQ(
      refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data.substr(0, 12)),
      path + ": bytes 0..4 of the data before tensor 'a' belong to no tensor");
  EXPECT_EQ(refused("{" + a + R"(,"b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})", data),
            path + ": bytes 8..12 of the data before tensor 'b' belong to no tensor");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data),
            path + ": 16 bytes of trailing data after the last tensor");
  EXPECT_EQ(
      refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})", data.substr(0, 8)),
      path + ": tensor 'a' has data_offsets [16, 24] beyond the 8 bytes of data (is the "
             "file truncated?)");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2, 3],"data_offsets":[0,8]}})", data),
            path + ": tensor 'a' has data_offsets [0, 8] (8 bytes) but F32 [2, 3] needs 24 "
                   "bytes");
  EXPECT_EQ(refused(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[8,0]}})", data),
            path + ": tensor 'a' has data_offsets [8, 0] that end before they begin");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", data),
            path + ": tensor 'a' has data_offsets that are not two non-negative integers");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.5]}})", data),
            path + ": tensor 'a' has data_offsets that are not two non-negative integers");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", data),
            path + ": tensor 'a' has data_offsets that are not two non-negative integers");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
            path + ": tensor 'a' has a shape that is not a list of non-negative integers");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", data),
            path + ": tensor 'a' has a shape that is not an array");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],)"
                    R"("data_offsets":[0,8]}})",
                    data),
            path + ": tensor 'a' has a shape [4294967296, 4294967296] too large to hold");
  EXPECT_EQ(refused(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", data),
            path + ": tensor 'a' has a dtype that is not a string");
  EXPECT_EQ(refused(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", data),
            path + ": tensor 'a' lacks 'dtype'");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", data),
            path + ": tensor 'a' lacks 'shape'");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2]}})", data),
            path + ": tensor 'a' lacks 'data_offsets'");
  EXPECT_EQ(refused(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data),
            path + ": tensor 'a' has an unexpected field 'x'");
  EXPECT_EQ(refused(R"({"a":[1]})", data), path + ": tensor 'a' is not a JSON object");
  EXPECT_EQ(refused(R"({"__metadata__":{"k":1}})", ""),
            path + ": __metadata__ entry 'k' is not a string");
  EXPECT_EQ(refused(R"({"__metadata__":[]})", ""), path + ": __metadata__ is not a JSON object");
  EXPECT_EQ(refused("{" + a + "," + a + "}", data.substr(0, 8)),
            path + ": invalid JSON header: duplicate key 'a' at byte 54");
  EXPECT_EQ(refused("{" + a + std::string("}\0\0", 3), data.substr(0, 8)),
            path + ": invalid JSON header: unexpected byte 0x00 after the value at byte 54");
}

TEST(Safetensors, NotAFile) {
  ScratchDir dir;
  std::string error;
  EXPECT_FALSE(readSafetensors(dir / "missing.safetensors", error));
  EXPECT_EQ(error, "cannot open " + (dir / "missing.safetensors") + ": No such file or directory");
  EXPECT_FALSE(readSafetensors(dir.path(), error));
  EXPECT_EQ(error, "cannot read " + dir.path() + ": it is a directory, not a regular file");
  // A FIFO is refused without waiting for a writer.
  ASSERT_EQ(::mkfifo((dir / "fifo.safetensors").c_str(), 0644), 0);
  EXPECT_FALSE(readSafetensors(dir / "fifo.safetensors", error));
  EXPECT_EQ(error, "cannot read " + (dir / "fifo.safetensors") +
                       ": it is a FIFO (named pipe), not a regular file");
}

TEST(Safetensors, DTypeHelpers) {
  EXPECT_EQ(parseDType("I64"), DType::I64);
  EXPECT_EQ(parseDType("f32"), std::nullopt);
  EXPECT_EQ(dtypeSize(DType::U8), 1);
  EXPECT_EQ(shapeElements({}), 1);
  EXPECT_EQ(shapeElements({3, 0, 5}), 0);
  EXPECT_EQ(shapeElements({-1}), -1);
  EXPECT_EQ(shapeElements({int64_t(1) << 32, int64_t(1) << 32}), -1);
  EXPECT_EQ(formatShape({128, 4, 32}), "[128, 4, 32]");
  EXPECT_EQ(formatShape({}), "[]");
}

} // namespace
