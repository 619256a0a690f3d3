//===- DataTest.cpp - Tests of the training data loader ---------------------===//

#include "runtime/core/Rng.h"
#include "runtime/host/Data.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <unistd.h>

using namespace tessel::rt;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace {

/// uint16 little-endian bytes of `tokens`.
std::string tokenBytes(const std::vector<uint16_t> &tokens) {
  std::string bytes;
  for (uint16_t token : tokens) {
    bytes += static_cast<char>(token & 0xFF);
    bytes += static_cast<char>(token >> 8);
  }
  return bytes;
}

/// uint32 little-endian bytes of `words`.
std::string wordBytes(const std::vector<uint32_t> &words) {
  std::string bytes;
  for (uint32_t word : words)
    for (int i = 0; i < 4; ++i)
      bytes += static_cast<char>(word >> (8 * i));
  return bytes;
}

/// llm.c's 1024-byte header (magic, version, token count) without the tokens.
std::string llmcHeader(uint32_t magic, uint32_t version, int64_t count) {
  std::vector<uint32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<uint32_t>(count);
  return wordBytes(header);
}

/// llm.c's GPT-2 token file: the header followed by uint16 tokens.
std::string llmcBytes(const std::vector<uint16_t> &tokens, uint32_t version = 1,
                      int64_t claimed = -1) {
  return llmcHeader(20240520, version, claimed < 0 ? int64_t(tokens.size()) : claimed) +
         tokenBytes(tokens);
}

/// llm.c's Llama 3 token file (magic 20240801, version 7): uint32 tokens.
std::string llama3Bytes(const std::vector<uint32_t> &tokens, uint32_t version = 7) {
  return llmcHeader(20240801, version, int64_t(tokens.size())) + wordBytes(tokens);
}

std::vector<uint32_t> widened(const std::vector<uint16_t> &tokens) {
  return std::vector<uint32_t>(tokens.begin(), tokens.end());
}

/// Tokens 0, 1, 2, ...: a window's values give its position.
std::vector<uint16_t> counting(size_t n) {
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<uint16_t>(i);
  return tokens;
}

std::string openError(const std::string &path, Tokenizer kind, int64_t vocab, double evalFraction,
                      int64_t window) {
  std::string error;
  auto data = TokenData::open(path, kind, vocab, evalFraction, window, error);
  EXPECT_FALSE(data) << path;
  EXPECT_FALSE(error.empty());
  return error;
}

std::vector<uint32_t> asTokens(const std::string &text) {
  return std::vector<uint32_t>(reinterpret_cast<const unsigned char *>(text.data()),
                               reinterpret_cast<const unsigned char *>(text.data()) + text.size());
}

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
  EXPECT_NE(fingerprint("large-last.txt", std::string(large).replace(large.size() - 1, 1, "#")),
            l);
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
                  dir.path() + "/*train*.bin\") and the validation files with eval.data or "
                               "--eval-data");
    std::filesystem::remove(dir / name);
  }
}

// Separate validation data evaluates whole: evaluation windows are spaced over all of it.
TEST(Data, EvaluationDataIsAllHeldOut) {
  ScratchDir dir;
  writeFile(dir / "val.bin", tokenBytes(counting(21)));
  std::string error;
  auto data = TokenData::openEvaluation(dir / "val.bin", Tokenizer::Tokens, 65536, 5, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->trainTokens(), 0);
  EXPECT_EQ(data->evalTokens(), 21);
  std::vector<int32_t> tokens(4), targets(4);
  ASSERT_TRUE(data->evalWindow(0, 2, tokens.data(), targets.data(), 4, error)) << error;
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_TRUE(data->evalWindow(1, 2, tokens.data(), targets.data(), 4, error)) << error;
  EXPECT_EQ(tokens, (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(targets, (std::vector<int32_t>{9, 10, 11, 12}));
  writeFile(dir / "short.bin", tokenBytes(counting(3)));
  EXPECT_FALSE(TokenData::openEvaluation(dir / "short.bin", Tokenizer::Tokens, 65536, 5, error));
  EXPECT_EQ(error, "eval data file " + (dir / "short.bin") +
                       " has 3 tokens; one evaluation window needs 5 (seq + 1)");
  EXPECT_FALSE(TokenData::openEvaluation(dir / "nope.bin", Tokenizer::Tokens, 65536, 5, error));
  EXPECT_EQ(error, "eval data file " + (dir / "nope.bin") + " does not exist");
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

TEST(Data, TooFewTokens) {
  ScratchDir dir;
  std::string path = dir / "small.txt";
  writeFile(path, std::string(40, 'x'));
  EXPECT_EQ(openError(path, Tokenizer::Byte, 256, 0, 65),
            "data file " + path + " has 40 tokens; a window needs 65 (seq + 1)");
  EXPECT_EQ(openError(path, Tokenizer::Byte, 256, 0.5, 30),
            "data file " + path +
                " has 40 tokens; a window needs 30 (seq + 1), and the train and eval splits "
                "need one window each (60 tokens)");
  std::string error;
  EXPECT_TRUE(TokenData::open(path, Tokenizer::Byte, 256, 0, 40, error)) << error;
  EXPECT_TRUE(TokenData::open(path, Tokenizer::Byte, 256, 0.5, 20, error)) << error;
}

TEST(Data, SplitTooShort) {
  ScratchDir dir;
  std::string path = dir / "x.txt";
  writeFile(path, std::string(1000, 'x'));
  EXPECT_EQ(openError(path, Tokenizer::Byte, 256, 0.05, 65),
            "data file " + path +
                ": the eval split (5% of 1000 tokens = 50) is shorter than one window (65 "
                "tokens); raise eval.fraction, use more data, or set eval.fraction = 0 to hold "
                "nothing out");
  EXPECT_EQ(openError(path, Tokenizer::Byte, 256, 0.95, 65),
            "data file " + path +
                ": the train split (5% of 1000 tokens = 50) is shorter than one window (65 "
                "tokens); lower the eval fraction");
}

TEST(Data, SplitSizes) {
  ScratchDir dir;
  std::string error;
  writeFile(dir / "a.txt", std::string(1000, 'x'));
  auto data = TokenData::open(dir / "a.txt", Tokenizer::Byte, 256, 0.1, 65, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->trainTokens(), 900);
  EXPECT_EQ(data->evalTokens(), 100);
  EXPECT_TRUE(data->hasEval());
  // The held-out part is rounded down: floor(1001 * 0.15) = 150.
  writeFile(dir / "b.txt", std::string(1001, 'x'));
  data = TokenData::open(dir / "b.txt", Tokenizer::Byte, 256, 0.15, 65, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->evalTokens(), 150);
  EXPECT_EQ(data->trainTokens(), 851);
  data = TokenData::open(dir / "b.txt", Tokenizer::Byte, 256, 0, 65, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->evalTokens(), 0);
  EXPECT_EQ(data->trainTokens(), 1001);
}

TEST(Data, TrainWindowsStayInTheTrainSplit) {
  ScratchDir dir;
  const int64_t total = 1000, seq = 64;
  writeFile(dir / "x.bin", tokenBytes(counting(total)));
  std::string error;
  auto data = TokenData::open(dir / "x.bin", Tokenizer::Tokens, 65536, 0.2, seq + 1, error);
  ASSERT_TRUE(data) << error;
  ASSERT_EQ(data->trainTokens(), 800);

  Rng rng(1);
  std::vector<int32_t> tokens(seq), targets(seq);
  std::set<int32_t> starts;
  for (int draw = 0; draw < 20000; ++draw) {
    EXPECT_TRUE(data->trainWindow(rng, tokens.data(), targets.data(), seq, error));
    int32_t start = tokens[0];
    starts.insert(start);
    for (int64_t i = 0; i < seq; ++i) {
      ASSERT_EQ(tokens[i], start + i);
      ASSERT_EQ(targets[i], start + i + 1); // targets are the inputs shifted by one
    }
    ASSERT_LT(targets[seq - 1], 800); // never reads into the eval split
  }
  // Every start in [0, trainTokens - seq) occurs, and nothing else.
  EXPECT_EQ(starts.size(), size_t(800 - seq));
  EXPECT_EQ(*starts.begin(), 0);
  EXPECT_EQ(*starts.rbegin(), 800 - seq - 1);

  // The start is rng.below(trainTokens - seq): the same stream gives the same windows.
  Rng a(7), b(7);
  EXPECT_TRUE(data->trainWindow(a, tokens.data(), targets.data(), seq, error));
  EXPECT_EQ(uint64_t(tokens[0]), b.below(800 - seq));
  // Shorter windows than the one given to open work too.
  EXPECT_TRUE(data->trainWindow(a, tokens.data(), targets.data(), 8, error));
  EXPECT_EQ(targets[7], tokens[7] + 1);
}

TEST(Data, EvalWindowsAreEvenlySpacedAndDeterministic) {
  ScratchDir dir;
  const int64_t total = 1000, seq = 16;
  writeFile(dir / "x.bin", tokenBytes(counting(total)));
  std::string error;
  auto data = TokenData::open(dir / "x.bin", Tokenizer::Tokens, 65536, 0.2, seq + 1, error);
  ASSERT_TRUE(data) << error;
  std::vector<int32_t> tokens(seq), targets(seq);
  const int64_t count = 8;
  int32_t previous = -1;
  for (int64_t index = 0; index < count; ++index) {
    EXPECT_TRUE(data->evalWindow(index, count, tokens.data(), targets.data(), seq, error));
    // start = trainTokens + floor(index * (evalTokens - seq) / count)
    EXPECT_EQ(tokens[0], 800 + index * (200 - seq) / count);
    for (int64_t i = 0; i < seq; ++i) {
      EXPECT_EQ(tokens[i], tokens[0] + i);
      EXPECT_EQ(targets[i], tokens[0] + i + 1);
    }
    EXPECT_GT(tokens[0], previous);
    EXPECT_LT(targets[seq - 1], total);
    previous = tokens[0];
    std::vector<int32_t> again(seq), againTargets(seq);
    EXPECT_TRUE(data->evalWindow(index, count, again.data(), againTargets.data(), seq, error));
    EXPECT_EQ(again, tokens);
  }
  // One window over the eval split reads its start; as many windows as positions read all.
  EXPECT_TRUE(data->evalWindow(0, 1, tokens.data(), targets.data(), seq, error));
  EXPECT_EQ(tokens[0], 800);
  EXPECT_TRUE(
      data->evalWindow(200 - seq - 1, 200 - seq, tokens.data(), targets.data(), seq, error));
  EXPECT_EQ(targets[seq - 1], total - 1);
}

TEST(Data, EachProcessReadsOnlyTheRowsItsRanksTake) {
  // A batch of 8 rows over two processes of two data-parallel halves, and a third process
  // (a middle pipeline stage) that takes no rows: each draws every row's start, as one process
  // running every rank does, and reads only its own windows.
  ScratchDir dir;
  const int64_t seq = 16, rows = 8;
  writeFile(dir / "x.bin", tokenBytes(counting(1000)));
  auto open = [&] {
    std::string error;
    auto data = TokenData::open(dir / "x.bin", Tokenizer::Tokens, 65536, 0.2, seq + 1, error);
    EXPECT_TRUE(data) << error;
    return data;
  };
  const std::vector<bool> all(rows, true), none(rows, false);
  std::vector<bool> first(rows, false), second(rows, true);
  for (int64_t row = 0; row < rows / 2; ++row) {
    first[row] = true;
    second[row] = false;
  }
  struct Process {
    std::unique_ptr<TokenData> data;
    std::vector<bool> taken;
    Rng rng{5};
    std::vector<int32_t> tokens, targets;
  };
  std::vector<Process> processes(4);
  const std::vector<bool> *takes[4] = {&all, &first, &second, &none};
  std::string error;
  for (int p = 0; p < 4; ++p) {
    processes[p].data = open();
    processes[p].taken = *takes[p];
  }
  for (int step = 0; step < 3; ++step) {
    for (Process &p : processes) {
      p.tokens.assign(rows * seq, -1);
      p.targets.assign(rows * seq, -1);
      ASSERT_TRUE(p.data->trainBatch(p.rng, p.taken, p.tokens.data(), p.targets.data(), seq, error))
          << error;
    }
    const Process &whole = processes[0];
    for (int64_t row = 0; row < rows; ++row) {
      // Row by row as trainWindow draws them.
      const int32_t start = whole.tokens[row * seq];
      EXPECT_EQ(whole.targets[row * seq + seq - 1], start + seq);
      for (int p = 1; p < 4; ++p)
        for (int64_t i = 0; i < seq; ++i) {
          const size_t at = static_cast<size_t>(row * seq + i);
          const int32_t want = processes[p].taken[row] ? whole.tokens[at] : -1;
          ASSERT_EQ(processes[p].tokens[at], want) << "process " << p << " row " << row;
          ASSERT_EQ(processes[p].targets[at], processes[p].taken[row] ? whole.targets[at] : -1);
        }
    }
  }
  EXPECT_EQ(processes[0].data->windowsRead(), 3 * rows);
  EXPECT_EQ(processes[1].data->windowsRead(), 3 * rows / 2);
  EXPECT_EQ(processes[2].data->windowsRead(), 3 * rows / 2);
  EXPECT_EQ(processes[3].data->windowsRead(), 0);
  // Every process's generator has moved on alike.
  const uint64_t next = processes[0].rng.below(1u << 30);
  for (int p = 1; p < 4; ++p)
    EXPECT_EQ(processes[p].rng.below(1u << 30), next) << "process " << p;

  // Evaluation reads the same rows of the held-out windows.
  std::vector<int32_t> tokens(rows * seq, -1), targets(rows * seq, -1);
  ASSERT_TRUE(processes[2].data->evalBatch(rows, 2 * rows, second, tokens.data(), targets.data(),
                                           seq, error))
      << error;
  EXPECT_EQ(processes[2].data->windowsRead(), 3 * rows / 2 + rows / 2);
  std::vector<int32_t> one(seq), oneTargets(seq);
  for (int64_t row = 0; row < rows; ++row) {
    ASSERT_TRUE(processes[0].data->evalWindow(rows + row, 2 * rows, one.data(), oneTargets.data(),
                                              seq, error));
    EXPECT_EQ(tokens[row * seq], second[row] ? one[0] : -1) << row;
    EXPECT_EQ(targets[row * seq + seq - 1], second[row] ? oneTargets[seq - 1] : -1) << row;
  }
}

/// A Tessel example file (common/data/TokenFiles.h) of `examples`, each (ids, mask), uint16 ids.
std::string exampleBytes(const std::vector<std::pair<std::vector<uint16_t>, std::string>> &examples,
                         uint32_t pad, int64_t claimedTokens = -1) {
  std::vector<uint32_t> header(256, 0);
  uint64_t tokens = 0;
  std::string starts = wordBytes({0, 0}), ids, mask;
  for (const auto &[t, m] : examples) {
    tokens += t.size();
    starts += wordBytes({static_cast<uint32_t>(tokens), 0});
    ids += tokenBytes(t);
    mask += m;
  }
  header[0] = 20261101;
  header[1] = 1;
  header[2] = 2;
  header[3] = pad;
  header[4] = static_cast<uint32_t>(examples.size());
  header[6] = static_cast<uint32_t>(claimedTokens < 0 ? int64_t(tokens) : claimedTokens);
  return wordBytes(header) + starts + ids + mask;
}

// Example files: a row is one example from its start, padded or cut, with the targets its
// mask leaves out ignored (-1); `counted` sums the targets that count over every row, read or
// not; the examples split into train and eval parts.
TEST(Data, ExampleRowsArePaddedCutAndMasked) {
  ScratchDir dir;
  const std::string M0 = std::string(1, '\0'), M1 = std::string(1, '\1');
  // Example 0: 3 tokens, the last two trained; example 1: 6 tokens (cut by seq 4), trained
  // from its third; example 2: 2 tokens, nothing trained.
  writeFile(dir / "ex.bin", exampleBytes({{{5, 6, 7}, M0 + M1 + M1},
                                          {{10, 11, 12, 13, 14, 15}, M0 + M0 + M1 + M1 + M1 + M1},
                                          {{20, 21}, M0 + M0}},
                                         /*pad=*/9));
  std::string error;
  const int64_t seq = 4;
  auto data = TokenData::open(dir / "ex.bin", Tokenizer::Tokens, 32, 0, seq + 1, error);
  ASSERT_TRUE(data) << error;
  EXPECT_TRUE(data->hasExamples());
  EXPECT_EQ(data->exampleCount(), 3);
  EXPECT_EQ(data->trainExamples(), 3);
  EXPECT_EQ(data->longExamples(), 1);
  EXPECT_EQ(data->untrainedExamples(), 1);
  std::vector<int32_t> tokens(seq), targets(seq);
  // Evaluation reads examples evenly spaced over the eval part: here all three in order.
  auto eval = TokenData::openEvaluation(dir / "ex.bin", Tokenizer::Tokens, 32, seq + 1, error);
  ASSERT_TRUE(eval) << error;
  const std::vector<std::vector<int32_t>> wantTokens = {
      {5, 6, 7, 9}, {10, 11, 12, 13}, {20, 21, 9, 9}};
  const std::vector<std::vector<int32_t>> wantTargets = {
      {6, 7, -1, -1}, {-1, 12, 13, 14}, {-1, -1, -1, -1}};
  for (int64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(eval->evalWindow(i, 3, tokens.data(), targets.data(), seq, error)) << error;
    EXPECT_EQ(tokens, wantTokens[i]) << "example " << i;
    EXPECT_EQ(targets, wantTargets[i]) << "example " << i;
  }
  // counted covers the rows not read as well: both processes see the batch's 2 + 3 + 0.
  std::vector<int32_t> rows(3 * seq, -7), rowTargets(3 * seq, -7);
  int64_t all = -1, part = -1;
  ASSERT_TRUE(eval->evalBatch(0, 3, {true, true, true}, rows.data(), rowTargets.data(), seq,
                              error, &all));
  ASSERT_TRUE(eval->evalBatch(0, 3, {false, true, false}, rows.data(), rowTargets.data(), seq,
                              error, &part));
  EXPECT_EQ(all, 5);
  EXPECT_EQ(part, 5);
  // Training draws whole examples.
  Rng rng(3);
  std::set<int32_t> firsts;
  for (int i = 0; i < 30; ++i) {
    int64_t counted = 0;
    ASSERT_TRUE(data->trainBatch(rng, {true}, tokens.data(), targets.data(), seq, error, &counted));
    firsts.insert(tokens[0]);
    EXPECT_EQ(counted, tokens[0] == 5 ? 2 : tokens[0] == 10 ? 3 : 0);
  }
  EXPECT_EQ(firsts, (std::set<int32_t>{5, 10, 20}));
  // A third held out: the last example evaluates.
  auto split = TokenData::open(dir / "ex.bin", Tokenizer::Tokens, 32, 0.34, seq + 1, error);
  ASSERT_TRUE(split) << error;
  EXPECT_EQ(split->trainExamples(), 2);
  EXPECT_TRUE(split->hasEval());
  ASSERT_TRUE(split->evalWindow(0, 1, tokens.data(), targets.data(), seq, error));
  EXPECT_EQ(tokens, wantTokens[2]);
}

TEST(Data, ExampleFileErrors) {
  ScratchDir dir;
  const std::string M01 = std::string("\0\1", 2);
  auto refusal = [&](const std::string &bytes, int64_t vocab = 32) {
    writeFile(dir / "bad.bin", bytes);
    return openError(dir / "bad.bin", Tokenizer::Tokens, vocab, 0, 5);
  };
  const std::string good = exampleBytes({{{1, 2}, M01}}, 0);
  writeFile(dir / "good.bin", good);
  std::string error;
  EXPECT_TRUE(TokenData::open(dir / "good.bin", Tokenizer::Tokens, 32, 0, 5, error)) << error;
  const std::string what = "data file " + (dir / "bad.bin");
  EXPECT_EQ(refusal(good.substr(0, good.size() - 1)),
            what + " is a Tessel example file whose header gives 1 examples of 2 tokens (1046 "
                   "bytes) but it has 1045 bytes");
  std::string badMask = good;
  badMask.back() = 2;
  EXPECT_EQ(refusal(badMask), what + ": the loss mask of an example file holds 2 at token 1; its "
                                     "bytes are 0 or 1 (the file is corrupt)");
  EXPECT_EQ(refusal(exampleBytes({{{1}, std::string(1, '\1')}}, 0)),
            what + ": example 0 of an example file has 1 tokens; an example needs 2 or more");
  EXPECT_EQ(refusal(exampleBytes({{{1, 2}, M01}}, 40)),
            what + ": an example file pads with token 40, not below the vocabulary size 32");
  EXPECT_EQ(refusal(exampleBytes({{{1, 33}, M01}}, 0)),
            what + ": token 33 at position 1 is not below the vocabulary size 32");
  std::string badStarts = good;
  badStarts[1024 + 8] = 1; // starts[1] = 1, not the 2 tokens
  EXPECT_EQ(refusal(badStarts), what + ": an example file's starts do not run from 0 to its 2 "
                                       "tokens (it is corrupt)");
  std::string version = good;
  version[4] = 2;
  EXPECT_EQ(refusal(version),
            what + " is a Tessel example file of version 2; this build reads version 1");
  // An example file and a token stream do not mix.
  const std::string mix = dir / "mix";
  std::filesystem::create_directory(mix);
  writeFile(mix + "/a.bin", good);
  writeFile(mix + "/b.bin", llmcBytes({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(openError(mix, Tokenizer::Tokens, 32, 0, 5),
            "data directory " + mix +
                " mixes example files (a.bin) with token streams (b.bin); train on one kind at "
                "a time");
}

TEST(Data, ContractViolationsAbort) {
  // Threadsafe death tests re-run the test body in the child, which then aborts: read a file
  // that needs no cleanup (any file is byte data) rather than one in a scratch directory.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string error;
  auto data = TokenData::open("/proc/self/exe", Tokenizer::Byte, 256, 0.5, 10, error);
  ASSERT_TRUE(data) << error;
  int64_t seq = data->trainTokens();
  std::vector<int32_t> tokens(size_t(seq + 1)), targets(size_t(seq + 1));
  Rng rng(1);
  EXPECT_DEATH(data->trainWindow(rng, tokens.data(), targets.data(), seq, error),
               "exceeds the train");
  EXPECT_DEATH(data->evalWindow(0, 1, tokens.data(), targets.data(), data->evalTokens(), error),
               "exceeds the eval");
  EXPECT_DEATH(data->evalWindow(1, 1, tokens.data(), targets.data(), 4, error), "outside");
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
