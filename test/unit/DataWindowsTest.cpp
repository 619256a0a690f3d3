//===- DataWindowsTest.cpp - Tests of the train and eval windows ----------===//
//
// The split of a token stream into train and eval parts, the windows and batches read from each
// (which rows each process reads), the example files' padded, cut and masked rows, and the
// contract violations that abort.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/Rng.h"
#include "runtime/host/Data.h"
#include "test/unit/DataTestSupport.h"
#include "test/unit/ScratchDir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace tessel::rt;
using tessel::test::ScratchDir;
using tessel::test::writeFile;

namespace {

using tessel::test::counting;
using tessel::test::llmcBytes;
using tessel::test::openError;
using tessel::test::tokenBytes;
using tessel::test::wordBytes;

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
  ASSERT_TRUE(
      eval->evalBatch(0, 3, {true, true, true}, rows.data(), rowTargets.data(), seq, error, &all));
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

} // namespace
