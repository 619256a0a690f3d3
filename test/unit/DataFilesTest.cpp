//===- DataFilesTest.cpp - Tests of the data files the loader opens -------===//
//
// Text read as bytes, nanoGPT's and llm.c's token files and their shards, directories and
// patterns of files, and the files and arguments the loader refuses, each with the reason.
//
//===----------------------------------------------------------------------===//

#include "runtime/host/Data.h"
#include "test/unit/DataTestSupport.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace tessel::rt;
using namespace tessel::test;

namespace {

TEST(Data, ByteFileTokensAreItsBytes) {
  ScratchDir dir;
  std::string text = "hello, world\n\x80\xff caf\xc3\xa9";
  writeFile(dir / "input.txt", text);
  std::string error;
  auto data = TokenData::open(dir / "input.txt", Tokenizer::Byte, 256, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->slice(0, data->totalTokens()), asTokens(text));
  EXPECT_EQ(data->slice(0, data->totalTokens())[13], 0x80);
  EXPECT_EQ(data->slice(0, data->totalTokens())[14], 0xFF);
  EXPECT_EQ(data->totalTokens(), int64_t(text.size()));
  EXPECT_EQ(data->trainTokens(), int64_t(text.size()));
  EXPECT_FALSE(data->hasEval());
  EXPECT_EQ(data->sources(), std::vector<std::string>{dir / "input.txt"});
}

TEST(Data, FingerprintTellsDataApartWithoutReadingItAll) {
  ScratchDir dir;
  auto fingerprint = [&](const std::string &name, const std::string &text) {
    writeFile(dir / name, text);
    std::string error;
    auto data = TokenData::open(dir / name, Tokenizer::Byte, 256, 0, 4, error);
    EXPECT_TRUE(data) << error;
    return data ? data->fingerprint() : 0;
  };
  // Small data is hashed whole: the same bytes anywhere give the same fingerprint, one byte
  // changed or one more byte another.
  std::string small(1000, 'a');
  const uint64_t a = fingerprint("a.txt", small);
  EXPECT_EQ(fingerprint("copy.txt", small), a);
  EXPECT_NE(fingerprint("changed.txt", std::string(small).replace(500, 1, "b")), a);
  EXPECT_NE(fingerprint("longer.txt", small + "a"), a);
  // Large data is sampled: its first and last bytes are in the pieces, and so is every byte
  // of a piece; the token count tells a truncated copy apart.
  std::string large(8 << 20, 'x');
  for (size_t i = 0; i < large.size(); i += 7)
    large[i] = static_cast<char>('a' + i % 23);
  const uint64_t l = fingerprint("large.txt", large);
  EXPECT_EQ(fingerprint("large-copy.txt", large), l);
  EXPECT_NE(fingerprint("large-first.txt", std::string(large).replace(0, 1, "#")), l);
  EXPECT_NE(fingerprint("large-last.txt", std::string(large).replace(large.size() - 1, 1, "#")), l);
  EXPECT_NE(fingerprint("large-short.txt", large.substr(0, large.size() - 2)), l);
}

TEST(Data, ByteTokenizerNeedsVocab256) {
  ScratchDir dir;
  writeFile(dir / "input.txt", std::string(100, 'a'));
  EXPECT_EQ(openError(dir / "input.txt", Tokenizer::Byte, 255, 0, 4),
            "the byte tokenizer needs a vocabulary of at least 256, not 255 (data " +
                (dir / "input.txt") + ")");
  std::string error;
  EXPECT_TRUE(TokenData::open(dir / "input.txt", Tokenizer::Byte, 320, 0, 4, error)) << error;
}

TEST(Data, DirectoryConcatenatesRegularFilesInNameOrder) {
  ScratchDir dir;
  // Laid out like /usr/share/games/fortunes: text files, .dat indexes, .u8 symlinks.
  writeFile(dir / "b-wisdom", "bbbb\n");
  writeFile(dir / "a-art", "aaaa\n");
  writeFile(dir / "a-art.dat", "INDEX");
  writeFile(dir / ".hidden", "hidden");
  ASSERT_EQ(::symlink("a-art", (dir / "a-art.u8").c_str()), 0);
  std::filesystem::create_directory(dir / "c-sub");
  writeFile(dir / "c-sub/inner", "inner");
  writeFile(dir / "Z-upper", "ZZ\n"); // byte order: uppercase sorts first

  std::string error;
  auto data = TokenData::open(dir.path(), Tokenizer::Byte, 256, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->slice(0, data->totalTokens()), asTokens("ZZ\naaaa\nbbbb\n"));
  EXPECT_EQ(data->sources(),
            (std::vector<std::string>{dir / "Z-upper", dir / "a-art", dir / "b-wisdom"}));
  // A trailing slash on the directory gives the same paths.
  data = TokenData::open(dir.path() + "/", Tokenizer::Byte, 256, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->sources().front(), dir / "Z-upper");
}

TEST(Data, DirectoryWithoutUsableFiles) {
  ScratchDir dir;
  EXPECT_EQ(openError(dir.path(), Tokenizer::Byte, 256, 0, 4),
            "data directory " + dir.path() +
                " has no usable files (it reads regular files, skipping symlinks, "
                "subdirectories, hidden files and names ending in .dat)");
  writeFile(dir / "only.dat", "index");
  std::filesystem::create_directory(dir / "sub");
  EXPECT_NE(openError(dir.path(), Tokenizer::Byte, 256, 0, 4).find("has no usable files"),
            std::string::npos);
  writeFile(dir / "empty.txt", "");
  EXPECT_EQ(openError(dir.path(), Tokenizer::Byte, 256, 0, 4),
            "data directory " + dir.path() + " is empty");
}

TEST(Data, FortunesDirectory) {
  const std::string fortunes = "/usr/share/games/fortunes";
  if (!std::filesystem::is_directory(fortunes))
    GTEST_SKIP() << fortunes << " is not installed";
  int64_t expected = 0;
  for (const auto &entry : std::filesystem::directory_iterator(fortunes)) {
    std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && !entry.is_symlink() && name[0] != '.' &&
        entry.path().extension() != ".dat")
      expected += static_cast<int64_t>(entry.file_size());
  }
  std::string error;
  auto data = TokenData::open(fortunes, Tokenizer::Byte, 256, 0.1, 257, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->totalTokens(), expected);
  for (const std::string &source : data->sources())
    EXPECT_NE(source.substr(source.size() - 4), ".dat");
}

TEST(Data, NanoGptBin) {
  ScratchDir dir;
  std::vector<uint16_t> tokens = {50256, 0, 1, 258, 65535, 7, 300, 12};
  writeFile(dir / "train.bin", tokenBytes(tokens));
  std::string error;
  auto data = TokenData::open(dir / "train.bin", Tokenizer::Tokens, 65536, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->slice(0, data->totalTokens()), widened(tokens));
}

TEST(Data, LlmcBin) {
  ScratchDir dir;
  std::vector<uint16_t> tokens = {50256, 464, 2068, 7586, 21831, 18045, 625, 262};
  writeFile(dir / "tiny_train.bin", llmcBytes(tokens));
  std::string error;
  auto data = TokenData::open(dir / "tiny_train.bin", Tokenizer::Tokens, 50257, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->slice(0, data->totalTokens()), widened(tokens));
}

// llm.c's Llama 3 files (magic 20240801, version 7) hold uint32 tokens: ids past 65535 read whole,
// and an id past the vocabulary is found.
TEST(Data, LlmcLlama3Bin) {
  ScratchDir dir;
  std::vector<uint32_t> tokens = {128000, 9906, 1917, 0, 128255, 65536, 70000, 13};
  writeFile(dir / "llama3_train.bin", llama3Bytes(tokens));
  std::string error;
  auto data = TokenData::open(dir / "llama3_train.bin", Tokenizer::Tokens, 128256, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->slice(0, data->totalTokens()), tokens);
  EXPECT_EQ(openError(dir / "llama3_train.bin", Tokenizer::Tokens, 128000, 0, 4),
            "data file " + (dir / "llama3_train.bin") +
                ": token 128000 at position 0 is not below the vocabulary size 128000");
}

TEST(Data, LlmcHeaderErrors) {
  ScratchDir dir;
  std::vector<uint16_t> tokens = counting(20);
  std::string path = dir / "x.bin";
  writeFile(path, llmcBytes(tokens, 2));
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 50257, 0, 4),
            "data file " + path +
                " is an llm.c token file (magic 20240520) of version 2; that magic goes with "
                "version 1 (uint16 tokens)");
  writeFile(path, llama3Bytes(widened(tokens), 1));
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 128256, 0, 4),
            "data file " + path +
                " is an llm.c token file (magic 20240801) of version 1; that magic goes with "
                "version 7 (uint32 tokens)");
  // A header written big-endian, and llm.c's model and state files, are not token data.
  std::string swapped = llmcBytes(tokens);
  std::reverse(swapped.begin(), swapped.begin() + 4);
  writeFile(path, swapped);
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 50257, 0, 4),
            "data file " + path +
                " starts with llm.c's magic 20240520 written big-endian; llm.c's files are "
                "little-endian");
  writeFile(path, llmcHeader(20240326, 3, 0) + std::string(64, '\0'));
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 50257, 0, 4),
            "data file " + path +
                " is an llm.c model checkpoint (magic 20240326), not a token file");
  writeFile(path, llmcBytes(tokens, 1, 25));
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 50257, 0, 4),
            "data file " + path +
                ": its llm.c header says 25 tokens (50 bytes) but 40 bytes follow the header");
  writeFile(path, llmcBytes(tokens).substr(0, 100));
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 50257, 0, 4),
            "data file " + path +
                " starts like an llm.c token file but its 100 bytes are too few for the "
                "1024-byte header");
}

TEST(Data, TokenErrors) {
  ScratchDir dir;
  std::string path = dir / "x.bin";
  writeFile(path, tokenBytes({1, 2, 3, 4, 5, 300, 7, 400}) + "\x01");
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 300, 0, 4),
            "data file " + path +
                " has an odd number of bytes (17); a .bin file without llm.c's header holds uint16 "
                "tokens");
  writeFile(path, tokenBytes({1, 2, 3, 4, 5, 300, 7, 400}));
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 300, 0, 4),
            "data file " + path + ": token 300 at position 5 is not below the vocabulary size 300");
  writeFile(path, "");
  EXPECT_EQ(openError(path, Tokenizer::Tokens, 300, 0, 4), "data file " + path + " is empty");
  EXPECT_EQ(openError(dir.path(), Tokenizer::Tokens, 300, 0, 4),
            "data directory " + dir.path() + " is empty");
}

// llm.c writes a corpus as numbered shards: a directory of them, or a pattern naming them, is
// one stream in name order, whatever each shard's format.
TEST(Data, TokenShardsReadInNameOrder) {
  ScratchDir dir;
  std::filesystem::create_directory(dir / "shards");
  std::vector<uint16_t> first = counting(30), second = {900, 901, 902, 903, 904};
  std::vector<uint32_t> third = {70000, 70001, 70002};
  writeFile(dir / "shards/corpus_train_000002.bin", llama3Bytes(third));
  writeFile(dir / "shards/corpus_train_000000.bin", llmcBytes(first));
  writeFile(dir / "shards/corpus_train_000001.bin", tokenBytes(second));
  writeFile(dir / "shards/README.md", "not a shard");
  std::vector<uint32_t> all = widened(first);
  all.insert(all.end(), second.begin(), second.end());
  all.insert(all.end(), third.begin(), third.end());
  for (const std::string &path :
       {dir / "shards", dir / "shards/", dir / "shards/corpus_train_*.bin",
        dir / "shards/corpus_train_00000[0-2].bin"}) {
    std::string error;
    auto data = TokenData::open(path, Tokenizer::Tokens, 128256, 0, 4, error);
    ASSERT_TRUE(data) << path << ": " << error;
    EXPECT_EQ(data->sources().size(), 3u) << path;
    EXPECT_EQ(data->slice(0, data->totalTokens()), all) << path;
  }
  // The held-out part is the stream's tail, across shards.
  std::string error;
  auto data = TokenData::open(dir / "shards/*.bin", Tokenizer::Tokens, 128256, 0.2, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->trainTokens(), 31);
  EXPECT_EQ(data->evalTokens(), 7);
  EXPECT_EQ(openError(dir / "shards/corpus_val_*.bin", Tokenizer::Tokens, 128256, 0, 4),
            "no file matches the data pattern " + (dir / "shards/corpus_val_*.bin"));
  std::filesystem::create_directory(dir / "none");
  writeFile(dir / "none/notes.txt", "text");
  EXPECT_EQ(openError(dir / "none", Tokenizer::Tokens, 65536, 0, 4),
            "data directory " + (dir / "none") + " has no .bin token files");
}

// A directory holding the validation split beside the training shards (nanoGPT's val.bin,
// llm.c's *_val_*.bin) is refused rather than trained on; "interval" is not "val".
TEST(Data, ShardDirectoryWithValidationSplitIsRefused) {
  ScratchDir dir;
  writeFile(dir / "train.bin", tokenBytes(counting(40)));
  writeFile(dir / "interval_000.bin", tokenBytes(counting(40)));
  std::string error;
  auto data = TokenData::open(dir.path(), Tokenizer::Tokens, 65536, 0, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->sources().size(), 2u);
  for (const char *name : {"val.bin", "fineweb_val_000000.bin", "data-Valid.bin"}) {
    writeFile(dir / name, tokenBytes(counting(10)));
    EXPECT_EQ(openError(dir.path(), Tokenizer::Tokens, 65536, 0, 4),
              "data directory " + dir.path() + " holds validation data (" + name +
                  ") beside the training files; name the training files with a pattern (\"" +
                  dir.path() +
                  "/*train*.bin\") and the validation files with eval.data or "
                  "--eval-data");
    std::filesystem::remove(dir / name);
  }
}

TEST(Data, MissingAndUnreadableFiles) {
  ScratchDir dir;
  EXPECT_EQ(openError(dir / "nope.txt", Tokenizer::Byte, 256, 0, 4),
            "data file " + (dir / "nope.txt") + " does not exist");
  ASSERT_EQ(::symlink("nowhere", (dir / "dangling").c_str()), 0);
  EXPECT_EQ(openError(dir / "dangling", Tokenizer::Byte, 256, 0, 4),
            "data file " + (dir / "dangling") + " does not exist");
  // Tests run as root, so permissions cannot make a file unreadable; /proc/self/mem opens
  // but fails to read at offset 0.
  if (std::filesystem::exists("/proc/self/mem")) {
    EXPECT_EQ(openError("/proc/self/mem", Tokenizer::Byte, 256, 0, 4)
                  .rfind("cannot read /proc/self/mem: ", 0),
              0u);
  }
}

TEST(Data, BadArguments) {
  ScratchDir dir;
  writeFile(dir / "x.txt", std::string(1000, 'x'));
  EXPECT_EQ(openError(dir / "x.txt", Tokenizer::Byte, 256, 0, 1),
            "data window must hold at least 2 tokens (seq + 1), not 1");
  EXPECT_EQ(openError(dir / "x.txt", Tokenizer::Byte, 256, 1.0, 4),
            "eval fraction must lie in [0, 1), not 1");
  EXPECT_EQ(openError(dir / "x.txt", Tokenizer::Byte, 256, -0.1, 4),
            "eval fraction must lie in [0, 1), not -0.1");
  EXPECT_EQ(openError(dir / "x.txt", Tokenizer::Tokens, 0, 0, 4),
            "vocabulary size must be positive, not 0");
}

TEST(Data, ByteHelpers) {
  std::string text = "caf\xc3\xa9\n\x01";
  std::vector<int32_t> tokens = encodeBytes(text);
  EXPECT_EQ(tokens, (std::vector<int32_t>{'c', 'a', 'f', 0xc3, 0xa9, '\n', 1}));
  EXPECT_EQ(decodeBytes(tokens.data(), int64_t(tokens.size())), text);
  std::vector<int32_t> odd = {'a', 256, -1, 'b'};
  EXPECT_EQ(decodeBytes(odd.data(), 4), "a\xEF\xBF\xBD\xEF\xBF\xBD"
                                        "b");
  EXPECT_EQ(decodeBytes(nullptr, 0), "");
}

} // namespace
