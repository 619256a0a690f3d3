//===- AtomicFileTest.cpp - Tests of whole-file reads and atomic writes ---===//

#include "runtime/support/AtomicFile.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace tessel::rt;
using tessel::test::readFile;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace fs = std::filesystem;

namespace {

std::set<std::string> listing(const std::string &dir) {
  std::set<std::string> names;
  for (const auto &entry : fs::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

TEST(AtomicFile, WritesAndReplaces) {
  ScratchDir dir;
  std::string path = dir / "f.txt";
  std::string error;
  ASSERT_TRUE(writeFileAtomically(path, "first", error)) << error;
  EXPECT_EQ(readFile(path), "first");
  ASSERT_TRUE(writeFileAtomically(path, std::string("sec\0nd", 6), error)) << error;
  EXPECT_EQ(readFile(path), std::string("sec\0nd", 6));
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"f.txt"});
  EXPECT_EQ(tempSuffix(), ".tmp-" + std::to_string(::getpid()));
}

TEST(AtomicFile, FailedProducerLeavesTheOldFile) {
  ScratchDir dir;
  std::string path = dir / "f.txt";
  writeFile(path, "old");
  std::string error;
  bool ok = writeFileAtomically(
      path,
      [](int fd, std::string &reason) {
        std::string part = "half of the new";
        if (!writeAll(fd, part.data(), part.size(), reason))
          return false;
        reason = "the producer gave up";
        return false;
      },
      error);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, "cannot write " + path + ": the producer gave up");
  EXPECT_EQ(readFile(path), "old");
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"f.txt"});
}

TEST(AtomicFile, WriteErrorsNameThePath) {
  ScratchDir dir;
  std::string error;
  EXPECT_FALSE(writeFileAtomically(dir / "missing/f.txt", "x", error));
  EXPECT_EQ(error, "cannot create " + (dir / "missing/f.txt") + tempSuffix() +
                       ": No such file or directory");
  EXPECT_FALSE(writeAll(-1, "x", 1, error));
  EXPECT_EQ(error, "Bad file descriptor");
}

TEST(AtomicFile, ReadWholeFile) {
  ScratchDir dir;
  std::string bytes(300000, 'x');
  bytes[123456] = '\0';
  writeFile(dir / "big", bytes);
  std::string out, error;
  ASSERT_TRUE(readWholeFile(dir / "big", bytes.size(), out, error)) << error;
  EXPECT_EQ(out, bytes);
  EXPECT_FALSE(readWholeFile(dir / "nope", 1 << 20, out, error));
  EXPECT_EQ(error, "cannot open " + (dir / "nope") + ": No such file or directory");
  EXPECT_FALSE(readWholeFile(dir.path(), 1 << 20, out, error));
  EXPECT_EQ(error, "cannot read " + dir.path() + ": it is a directory, not a regular file");
  // One byte over the limit is refused before it is read.
  EXPECT_FALSE(readWholeFile(dir / "big", bytes.size() - 1, out, error));
  EXPECT_EQ(error, "cannot read " + (dir / "big") + ": it is 300000 bytes, over the 299999 such a "
                                                     "file may hold");
}

// Where a file is expected, a FIFO is refused at once (opening it to read would wait for a
// writer forever), and so is a device that would be read without end.
TEST(AtomicFile, ReadWholeFileRefusesFifosAndDevices) {
  ScratchDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0644), 0);
  std::string out, error;
  EXPECT_FALSE(readWholeFile(dir / "fifo", 1 << 20, out, error));
  EXPECT_EQ(error, "cannot read " + (dir / "fifo") + ": it is a FIFO (named pipe), not a regular "
                                                      "file");
  EXPECT_FALSE(readWholeFile("/dev/zero", 1 << 20, out, error));
  EXPECT_EQ(error, "cannot read /dev/zero: it is a character device, not a regular file");
  uint64_t bytes = 0;
  EXPECT_EQ(openRegularFile(dir / "fifo", 1 << 20, bytes, error), -1);
}

TEST(AtomicFile, ReplaceDirectory) {
  ScratchDir dir;
  std::string error;
  fs::create_directory(dir / ".new1");
  writeFile(dir / ".new1/a", "one");
  ASSERT_TRUE(replaceDirectoryAtomically(dir / ".new1", dir / "final", error)) << error;
  EXPECT_EQ(readFile(dir / "final/a"), "one");

  // Replacing an existing directory swaps it in whole and deletes the old contents.
  fs::create_directory(dir / ".new2");
  writeFile(dir / ".new2/b", "two");
  ASSERT_TRUE(replaceDirectoryAtomically(dir / ".new2", dir / "final", error)) << error;
  EXPECT_EQ(listing(dir / "final"), std::set<std::string>{"b"});
  EXPECT_EQ(listing(dir.path()), std::set<std::string>{"final"});

  EXPECT_FALSE(replaceDirectoryAtomically(dir / ".missing", dir / "other", error));
  EXPECT_EQ(error, "cannot rename " + (dir / ".missing") + " to " + (dir / "other") +
                       ": No such file or directory");
}

TEST(AtomicFile, ParentDirectory) {
  EXPECT_EQ(parentDirectory("a/b/c"), "a/b");
  EXPECT_EQ(parentDirectory("c"), ".");
  EXPECT_EQ(parentDirectory("/c"), "/");
}

} // namespace
