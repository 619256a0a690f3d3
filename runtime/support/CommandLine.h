//===- CommandLine.h - The runtime tools' one argument parser ---*- C++ -*-===//
//
// Every runtime-side program (the runner a compiled model is, tessel-rendezvous, tessel-nvrtc,
// tessel-calibrate, the kernel benchmarks) declares its options in one table, from which the
// parser reads `--name VALUE` and `--name=VALUE`, checks each value against its type and range,
// answers `--help` with text generated from the same table and `--version` with the build's
// version line, and refuses a misspelt option with the nearest known one ("did you mean").
//
//   cli::Parser p("tessel-calibrate", "[options]", "Measures this machine ...");
//   p.section("Measuring");
//   p.integer("threads", threads, 1, 1024, "N", "compute threads per rank");
//   p.flag("quick", quick, "shorter measurements");
//   if (auto exit = p.parse(argc, argv)) return *exit;
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_SUPPORT_COMMANDLINE_H
#define TESSEL_RUNTIME_SUPPORT_COMMANDLINE_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt::cli {

class Parser {
public:
  /// `program` names the tool in messages (usually argv[0]); `synopsis` follows it in the
  /// usage line; `description` is the help's first paragraph.
  Parser(std::string program, std::string synopsis, std::string description);

  /// Starts a group of options under a heading in the help.
  void section(std::string title);
  /// A paragraph of the help after the options declared so far (wrapped like the rest).
  void paragraph(std::string text);

  /// --name: sets `out` to true.
  void flag(const std::string &name, bool &out, std::string help);
  /// --name N: an integer from `min` to `max`.
  void integer(const std::string &name, int64_t &out, int64_t min, int64_t max,
               std::string valueName, std::string help);
  void integer(const std::string &name, std::optional<int64_t> &out, int64_t min, int64_t max,
               std::string valueName, std::string help);
  void integer(const std::string &name, int &out, int min, int max, std::string valueName,
               std::string help);
  /// --name A,B,...: integers from `min` to `max`, separated by commas.
  void integerList(const std::string &name, std::vector<int64_t> &out, int64_t min, int64_t max,
                   std::string valueName, std::string help);
  /// Which ends of a number's range are excluded.
  enum class Interval { Closed, AboveMin, BelowMax };
  /// --name X: a finite decimal number from `min` to `max`.
  void number(const std::string &name, double &out, double min, double max,
              std::string valueName, std::string help, Interval interval = Interval::Closed);
  void number(const std::string &name, std::optional<double> &out, double min, double max,
              std::string valueName, std::string help, Interval interval = Interval::Closed);
  /// --name TEXT: any text (an empty value is refused unless `allowEmpty`).
  void text(const std::string &name, std::string &out, std::string valueName, std::string help,
            bool allowEmpty = false);
  /// --name TEXT into an optional, set only when given (never empty).
  void text(const std::string &name, std::optional<std::string> &out, std::string valueName,
            std::string help);
  /// --name X where X is one of `choices`.
  void choice(const std::string &name, std::string &out, std::vector<std::string> choices,
              std::string help);
  /// --name TEXT handled by `accept`, which returns false with a reason in its second argument
  /// for a value it refuses (the parser names the option before the reason).
  void custom(const std::string &name, std::string valueName, std::string help,
              std::function<bool(const std::string &, std::string &)> accept);
  /// Arguments that are not options (files, say), each handed to `accept`; without this an
  /// argument that does not start with "--" is refused.
  void positional(std::string valueName,
                  std::function<bool(const std::string &, std::string &)> accept);
  /// What --version prints after the version line (the runner adds its plan); optional.
  void versionDetails(std::function<std::string()> details);

  /// Reads the arguments. Returns nothing when the program should go on; otherwise the exit
  /// code: 0 after --help or --version (printed to stdout), 2 after a usage error (printed to
  /// stderr with a pointer to --help).
  std::optional<int> parse(int argc, const char *const *argv);

  /// The options given on the command line, in order, as "--name" or "--name=VALUE" (a
  /// record of what a run was asked to do).
  const std::vector<std::string> &given() const { return given_; }
  /// Whether option `name` (without dashes) was given.
  bool wasGiven(const std::string &name) const;

  /// The generated help text.
  std::string help() const;
  /// The usage error `message` as the parser prints one, returning 2.
  int usageError(const std::string &message) const;

  /// The known option nearest to `name` by edit distance, if near enough to suggest.
  std::optional<std::string> nearest(const std::string &name) const;

private:
  struct Option {
    std::string name, valueName, help, section;
    /// Null for a flag.
    std::function<bool(const std::string &, std::string &)> accept;
    bool *flag = nullptr;
  };
  void add(Option option);
  const Option *find(const std::string &name) const;

  std::string program_, synopsis_, description_, section_;
  std::vector<Option> options_;
  /// Help paragraphs, each after the option count it follows.
  std::vector<std::pair<size_t, std::string>> paragraphs_;
  std::function<bool(const std::string &, std::string &)> positional_;
  std::string positionalName_;
  std::function<std::string()> versionDetails_;
  std::vector<std::string> given_;
};

/// Edit distance (insertions, deletions, substitutions, and swaps of adjacent letters).
size_t editDistance(const std::string &a, const std::string &b);

} // namespace tessel::rt::cli

#endif // TESSEL_RUNTIME_SUPPORT_COMMANDLINE_H
