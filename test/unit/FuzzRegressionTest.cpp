//===- FuzzRegressionTest.cpp - Every fuzz input kept, replayed -----------===//
//
// The seeds of each file-format fuzzer and every input that once crashed one
// (test/fuzz/inputs/<target>/), fed to its target (test/fuzz/FuzzTargets.h) in the ordinary
// build: a reader that crashes, reads past its input or fails its round trip on one of them
// fails here, without clang or libFuzzer.
//
//===----------------------------------------------------------------------===//

#include "test/fuzz/FuzzTargets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#ifndef TESSEL_SOURCE_DIR
#error "TESSEL_SOURCE_DIR names the source tree"
#endif

namespace {

namespace fs = std::filesystem;

TEST(FuzzRegression, EveryKeptInputReadsWithoutACrash) {
  const fs::path inputs = fs::path(TESSEL_SOURCE_DIR) / "test/fuzz/inputs";
  size_t replayed = 0;
  for (size_t t = 0; t < tessel::fuzz::kTargetCount; ++t) {
    const tessel::fuzz::Target &target = tessel::fuzz::kTargets[t];
    const fs::path dir = inputs / target.name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir << ": every target keeps its seeds";
    size_t mine = 0;
    for (const fs::directory_entry &entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file())
        continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      SCOPED_TRACE(entry.path().string());
      target.run(bytes.data(), bytes.size());
      ++mine;
    }
    EXPECT_GT(mine, 0u) << dir << " holds no input";
    replayed += mine;
  }
  std::printf("[ fuzz     ] %zu kept inputs of %zu targets replayed\n", replayed,
              tessel::fuzz::kTargetCount);
}

} // namespace
