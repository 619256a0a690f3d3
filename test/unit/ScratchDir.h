//===- ScratchDir.h - Temporary directories for the unit tests --*- C++ -*-===//

#ifndef TESSEL_TEST_UNIT_SCRATCHDIR_H
#define TESSEL_TEST_UNIT_SCRATCHDIR_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace tessel::test {

/// A fresh directory under testing::TempDir(), removed with everything in it at scope exit.
class ScratchDir {
public:
  ScratchDir() {
    std::string pattern = testing::TempDir();
    if (!pattern.empty() && pattern.back() != '/')
      pattern += '/';
    pattern += "tessel-unit-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  const std::string &path() const { return path_; }
  /// The path of `name` inside the directory.
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

/// Writes `bytes` to `path`, replacing it.
inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

/// The bytes of `path` ("" when unreadable).
inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace tessel::test

#endif // TESSEL_TEST_UNIT_SCRATCHDIR_H
