//===- CommandLineTest.cpp - The runtime tools' argument parser -----------===//

#include "runtime/support/CommandLine.h"

#include <gtest/gtest.h>

#include <vector>

using namespace tessel::rt::cli;

namespace {

/// Parses `args` (after a program name) with `p`, capturing what it prints to stderr.
std::optional<int> parse(Parser &p, std::vector<const char *> args, std::string *err = nullptr) {
  args.insert(args.begin(), "tool");
  testing::internal::CaptureStderr();
  std::optional<int> exit = p.parse(static_cast<int>(args.size()), args.data());
  std::string printed = testing::internal::GetCapturedStderr();
  if (err)
    *err = printed;
  return exit;
}

TEST(CommandLineTest, ReadsValuesInBothSpellings) {
  Parser p("tool", "", "");
  int64_t steps = 0;
  std::optional<double> lr;
  std::string path;
  bool quiet = false;
  p.integer("steps", steps, 0, 100, "N", "");
  p.number("lr", lr, 0, 1, "LR", "", Parser::Interval::AboveMin);
  p.text("data", path, "PATH", "");
  p.flag("quiet", quiet, "");
  EXPECT_EQ(parse(p, {"--steps", "7", "--lr=0.5", "--data", "x.txt", "--quiet"}), std::nullopt);
  EXPECT_EQ(steps, 7);
  EXPECT_EQ(lr, 0.5);
  EXPECT_EQ(path, "x.txt");
  EXPECT_TRUE(quiet);
  EXPECT_EQ(p.given(), (std::vector<std::string>{"--steps=7", "--lr=0.5", "--data=x.txt",
                                                   "--quiet"}));
  EXPECT_TRUE(p.wasGiven("lr"));
  EXPECT_FALSE(p.wasGiven("l"));
}

TEST(CommandLineTest, RefusesValuesOutsideTheirRangeAndSaysWhich) {
  int64_t steps = 3;
  double x = 0;
  std::string err;
  {
    Parser p("tool", "", "");
    p.integer("steps", steps, 0, std::numeric_limits<int64_t>::max(), "N", "");
    EXPECT_EQ(parse(p, {"--steps", "-1"}, &err), 2);
    EXPECT_NE(err.find("tool: error: --steps -1: expected an integer of at least 0"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("Try 'tool --help'."), std::string::npos);
    EXPECT_EQ(steps, 3);
  }
  for (const char *bad : {"0x10", "inf", "nan", "1e400", "", "2", "0"}) {
    Parser p("tool", "", "");
    p.number("x", x, 0, 1, "X", "", Parser::Interval::AboveMin);
    EXPECT_EQ(parse(p, {"--x", bad}, &err), 2) << bad;
    EXPECT_NE(err.find("expected a number above 0 and at most 1"), std::string::npos) << err;
  }
  {
    Parser p("tool", "", "");
    p.number("beta", x, 0, 1, "B", "", Parser::Interval::BelowMax);
    EXPECT_EQ(parse(p, {"--beta", "1"}, &err), 2);
    EXPECT_EQ(parse(p, {"--beta", "0"}), std::nullopt);
  }
  {
    Parser p("tool", "", "");
    p.integer("steps", steps, 0, 10, "N", "");
    EXPECT_EQ(parse(p, {"--steps"}, &err), 2);
    EXPECT_NE(err.find("option '--steps' needs a value (N)"), std::string::npos) << err;
    EXPECT_EQ(parse(p, {"--steps", "99999999999999999999"}, &err), 2);
    EXPECT_NE(err.find("expected an integer from 0 to 10"), std::string::npos) << err;
  }
}

TEST(CommandLineTest, SuggestsTheNearestOption) {
  Parser p("tool", "", "");
  int64_t n = 0;
  std::string s;
  bool b = false;
  p.integer("steps", n, 0, 10, "N", "");
  p.text("checkpoint-dir", s, "DIR", "");
  p.flag("quiet", b, "");
  std::string err;
  EXPECT_EQ(parse(p, {"--stpes", "3"}, &err), 2);
  EXPECT_NE(err.find("unknown option '--stpes'; did you mean '--steps'?"), std::string::npos);
  EXPECT_EQ(parse(p, {"--checkpoint-di=x"}, &err), 2);
  EXPECT_NE(err.find("unknown option '--checkpoint-di'; did you mean '--checkpoint-dir'?"),
            std::string::npos)
      << err;
  EXPECT_EQ(parse(p, {"-steps", "3"}, &err), 2);
  EXPECT_NE(err.find("did you mean '--steps'?"), std::string::npos) << err;
  EXPECT_EQ(parse(p, {"--frobnicate"}, &err), 2);
  EXPECT_EQ(err.find("did you mean"), std::string::npos) << err;
  EXPECT_EQ(parse(p, {"--quiet=1"}, &err), 2);
  EXPECT_NE(err.find("option '--quiet' takes no value"), std::string::npos);
  EXPECT_EQ(parse(p, {"stray"}, &err), 2);
  EXPECT_NE(err.find("unexpected argument 'stray'"), std::string::npos);
}

TEST(CommandLineTest, EditDistanceCountsSwapsAsOne) {
  EXPECT_EQ(editDistance("steps", "steps"), 0u);
  EXPECT_EQ(editDistance("stpes", "steps"), 1u);
  EXPECT_EQ(editDistance("step", "steps"), 1u);
  EXPECT_EQ(editDistance("", "abc"), 3u);
  EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
}

TEST(CommandLineTest, ListsChoicesAndPositionals) {
  Parser p("tool", "[options] FILE...", "");
  std::string device = "cpu";
  std::vector<int64_t> seqs;
  std::vector<std::string> files;
  p.choice("device", device, {"cpu", "cuda"}, "");
  p.integerList("seq", seqs, 1, 100, "L,...", "");
  p.positional("FILE", [&](const std::string &f, std::string &) {
    files.push_back(f);
    return true;
  });
  std::string err;
  EXPECT_EQ(parse(p, {"a", "--device", "cuda", "--seq", "1,2,3", "b", "--", "--c"}),
            std::nullopt);
  EXPECT_EQ(device, "cuda");
  EXPECT_EQ(seqs, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(files, (std::vector<std::string>{"a", "b", "--c"}));
  EXPECT_EQ(parse(p, {"--device", "gpu"}, &err), 2);
  EXPECT_NE(err.find("--device gpu: expected one of cpu|cuda"), std::string::npos) << err;
  EXPECT_EQ(parse(p, {"--seq", "1,,2"}, &err), 2);
  EXPECT_NE(err.find("expected integers from 1 to 100, separated by commas"), std::string::npos)
      << err;
}

TEST(CommandLineTest, GeneratesHelpFromTheTable) {
  Parser p("tool", "[options]", "Does a thing.");
  int64_t n = 0;
  bool b = false;
  p.section("Training");
  p.integer("steps", n, 0, 10, "N", "optimizer steps to run");
  p.paragraph("A note.");
  p.section("Other");
  p.flag("quiet", b, "no progress output");
  std::string help = p.help();
  EXPECT_NE(help.find("usage: tool [options]\n\nDoes a thing.\n"), std::string::npos) << help;
  EXPECT_NE(help.find("Training:\n  --steps N              optimizer steps to run\n"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("\nA note.\n\nOther:\n  --quiet"), std::string::npos) << help;
  EXPECT_NE(help.find("  --version              print the version and exit\n"),
            std::string::npos);
  EXPECT_NE(help.find("  --help                 show this text\n"), std::string::npos);
  testing::internal::CaptureStdout();
  const char *args[] = {"tool", "--help"};
  EXPECT_EQ(p.parse(2, args), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), help);
}

TEST(CommandLineTest, VersionNamesTheBuild) {
  Parser p("tool", "", "");
  p.versionDetails([] { return std::string("plan: x\n"); });
  testing::internal::CaptureStdout();
  const char *args[] = {"tool", "--version"};
  EXPECT_EQ(p.parse(2, args), 0);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out.rfind("tessel ", 0), 0u) << out;
  EXPECT_NE(out.find("(commit "), std::string::npos) << out;
  EXPECT_NE(out.find("\nplan: x\n"), std::string::npos) << out;
}

} // namespace
