//===- CommandLine.cpp - The runtime tools' one argument parser -----------===//

#include "runtime/support/CommandLine.h"

#include "common/support/Version.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

namespace tessel::rt::cli {

namespace {

/// Help lines are wrapped to this width, option help starting at kHelpColumn.
constexpr size_t kWidth = 96, kHelpColumn = 25;

/// `text` wrapped to `width` columns, every line after the first indented by `indent` spaces
/// (the first is the caller's to place); "\n" in the text starts a new line.
std::string wrap(const std::string &text, size_t indent, size_t firstColumn) {
  std::string out;
  size_t column = firstColumn;
  std::istringstream lines(text);
  std::string line;
  bool firstLine = true;
  while (std::getline(lines, line)) {
    if (!firstLine) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    }
    firstLine = false;
    std::istringstream words(line);
    std::string word;
    bool lineStart = true;
    while (words >> word) {
      if (!lineStart && column + 1 + word.size() > kWidth) {
        out += "\n" + std::string(indent, ' ');
        column = indent;
        lineStart = true;
      }
      if (!lineStart) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
      lineStart = false;
    }
  }
  return out;
}

std::string rangeText(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max())
    return "an integer of at least " + std::to_string(min);
  return "an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

bool readInteger(const std::string &text, int64_t min, int64_t max, int64_t &out,
                 std::string &reason) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno || *end || v < min || v > max) {
    reason = "expected " + rangeText(min, max);
    return false;
  }
  out = v;
  return true;
}

/// Writes `v` as the help and messages show a bound: integral values without a fraction.
std::string numberText(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

bool readNumber(const std::string &text, double min, double max, Parser::Interval interval,
                double &out, std::string &reason) {
  const bool aboveMin = interval == Parser::Interval::AboveMin;
  const bool belowMax = interval == Parser::Interval::BelowMax;
  // Decimal notation only: strtod would also take "0x10", "inf" and "nan".
  bool decimal = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char *end = nullptr;
  errno = 0;
  double v = decimal ? std::strtod(text.c_str(), &end) : 0;
  if (!decimal || errno || *end || !std::isfinite(v) || v < min || v > max ||
      (aboveMin && v == min) || (belowMax && v == max)) {
    reason = "expected a number ";
    if (max == std::numeric_limits<double>::max())
      reason += (aboveMin ? "above " : "of at least ") + numberText(min);
    else if (belowMax)
      reason += "from " + numberText(min) + " up to (not including) " + numberText(max);
    else if (aboveMin)
      reason += "above " + numberText(min) + " and at most " + numberText(max);
    else
      reason += "from " + numberText(min) + " to " + numberText(max);
    return false;
  }
  out = v;
  return true;
}

} // namespace

size_t editDistance(const std::string &a, const std::string &b) {
  // Optimal string alignment: Levenshtein with adjacent swaps ("stpes" is one edit from
  // "steps").
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

Parser::Parser(std::string program, std::string synopsis, std::string description)
    : program_(std::move(program)), synopsis_(std::move(synopsis)),
      description_(std::move(description)) {}

void Parser::section(std::string title) { section_ = std::move(title); }

void Parser::paragraph(std::string text) {
  paragraphs_.emplace_back(options_.size(), std::move(text));
}

void Parser::add(Option option) {
  option.section = section_;
  options_.push_back(std::move(option));
}

void Parser::flag(const std::string &name, bool &out, std::string help) {
  Option o;
  o.name = name;
  o.help = std::move(help);
  o.flag = &out;
  add(std::move(o));
}

void Parser::integer(const std::string &name, int64_t &out, int64_t min, int64_t max,
                     std::string valueName, std::string help) {
  custom(name, std::move(valueName), std::move(help),
         [&out, min, max](const std::string &text, std::string &reason) {
           return readInteger(text, min, max, out, reason);
         });
}

void Parser::integer(const std::string &name, std::optional<int64_t> &out, int64_t min,
                     int64_t max, std::string valueName, std::string help) {
  custom(name, std::move(valueName), std::move(help),
         [&out, min, max](const std::string &text, std::string &reason) {
           int64_t v;
           if (!readInteger(text, min, max, v, reason))
             return false;
           out = v;
           return true;
         });
}

void Parser::integer(const std::string &name, int &out, int min, int max, std::string valueName,
                     std::string help) {
  custom(name, std::move(valueName), std::move(help),
         [&out, min, max](const std::string &text, std::string &reason) {
           int64_t v;
           if (!readInteger(text, min, max, v, reason))
             return false;
           out = static_cast<int>(v);
           return true;
         });
}

void Parser::integerList(const std::string &name, std::vector<int64_t> &out, int64_t min,
                         int64_t max, std::string valueName, std::string help) {
  custom(name, std::move(valueName), std::move(help),
         [&out, min, max](const std::string &text, std::string &reason) {
           std::vector<int64_t> values;
           size_t at = 0;
           while (at <= text.size()) {
             size_t comma = std::min(text.find(',', at), text.size());
             int64_t v;
             if (!readInteger(text.substr(at, comma - at), min, max, v, reason)) {
               reason = "expected integers from " + std::to_string(min) + " to " +
                        std::to_string(max) + ", separated by commas";
               return false;
             }
             values.push_back(v);
             at = comma + 1;
           }
           out = std::move(values);
           return true;
         });
}

void Parser::number(const std::string &name, double &out, double min, double max,
                    std::string valueName, std::string help, Interval interval) {
  custom(name, std::move(valueName), std::move(help),
         [&out, min, max, interval](const std::string &text, std::string &reason) {
           return readNumber(text, min, max, interval, out, reason);
         });
}

void Parser::number(const std::string &name, std::optional<double> &out, double min, double max,
                    std::string valueName, std::string help, Interval interval) {
  custom(name, std::move(valueName), std::move(help),
         [&out, min, max, interval](const std::string &text, std::string &reason) {
           double v;
           if (!readNumber(text, min, max, interval, v, reason))
             return false;
           out = v;
           return true;
         });
}

void Parser::text(const std::string &name, std::string &out, std::string valueName,
                  std::string help, bool allowEmpty) {
  custom(name, std::move(valueName), std::move(help),
         [&out, allowEmpty](const std::string &text, std::string &reason) {
           if (text.empty() && !allowEmpty) {
             reason = "expected a value, not an empty string";
             return false;
           }
           out = text;
           return true;
         });
}

void Parser::text(const std::string &name, std::optional<std::string> &out,
                  std::string valueName, std::string help) {
  custom(name, std::move(valueName), std::move(help),
         [&out](const std::string &text, std::string &reason) {
           if (text.empty()) {
             reason = "expected a value, not an empty string";
             return false;
           }
           out = text;
           return true;
         });
}

void Parser::choice(const std::string &name, std::string &out, std::vector<std::string> choices,
                    std::string help) {
  std::string valueName;
  for (const std::string &c : choices)
    valueName += (valueName.empty() ? "" : "|") + c;
  custom(name, valueName, std::move(help),
         [&out, choices, valueName](const std::string &text, std::string &reason) {
           if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
             reason = "expected one of " + valueName;
             return false;
           }
           out = text;
           return true;
         });
}

void Parser::custom(const std::string &name, std::string valueName, std::string help,
                    std::function<bool(const std::string &, std::string &)> accept) {
  Option o;
  o.name = name;
  o.valueName = std::move(valueName);
  o.help = std::move(help);
  o.accept = std::move(accept);
  add(std::move(o));
}

void Parser::positional(std::string valueName,
                        std::function<bool(const std::string &, std::string &)> accept) {
  positionalName_ = std::move(valueName);
  positional_ = std::move(accept);
}

void Parser::versionDetails(std::function<std::string()> details) {
  versionDetails_ = std::move(details);
}

const Parser::Option *Parser::find(const std::string &name) const {
  for (const Option &o : options_)
    if (o.name == name)
      return &o;
  return nullptr;
}

bool Parser::wasGiven(const std::string &name) const {
  const std::string bare = "--" + name;
  return std::any_of(given_.begin(), given_.end(), [&](const std::string &g) {
    return g == bare || g.rfind(bare + "=", 0) == 0;
  });
}

std::optional<std::string> Parser::nearest(const std::string &name) const {
  std::optional<std::string> best;
  size_t bestDistance = std::max<size_t>(2, name.size() / 3) + 1;
  std::vector<std::string> names = {"help", "version"};
  for (const Option &o : options_)
    names.push_back(o.name);
  for (const std::string &candidate : names) {
    size_t d = editDistance(name, candidate);
    // A prefix of a longer option ("--check" for "--checkpoint-dir") is suggested too.
    if (candidate.rfind(name, 0) == 0 && name.size() >= 3)
      d = std::min<size_t>(d, 1);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best;
}

int Parser::usageError(const std::string &message) const {
  std::fprintf(stderr, "%s: error: %s\nTry '%s --help'.\n", program_.c_str(), message.c_str(),
               program_.c_str());
  return 2;
}

std::string Parser::help() const {
  std::string out = "usage: " + program_ + (synopsis_.empty() ? "" : " " + synopsis_) + "\n";
  if (!description_.empty())
    out += "\n" + wrap(description_, 0, 0) + "\n";
  std::string section;
  bool first = true;
  auto paragraphsAt = [&](size_t index) {
    for (const auto &[at, text] : paragraphs_)
      if (at == index)
        out += "\n" + wrap(text, 0, 0) + "\n";
  };
  auto optionLine = [&](const std::string &left, const std::string &help) {
    out += left;
    if (left.size() + 1 > kHelpColumn)
      out += "\n" + std::string(kHelpColumn, ' ');
    else
      out += std::string(kHelpColumn - left.size(), ' ');
    out += wrap(help, kHelpColumn, kHelpColumn) + "\n";
  };
  for (size_t i = 0; i < options_.size(); ++i) {
    paragraphsAt(i);
    const Option &o = options_[i];
    if (first || o.section != section) {
      out += "\n" + (o.section.empty() ? std::string("Options") : o.section) + ":\n";
      section = o.section;
      first = false;
    }
    optionLine("  --" + o.name + (o.valueName.empty() ? "" : " " + o.valueName), o.help);
  }
  paragraphsAt(options_.size());
  if (first)
    out += "\nOptions:\n";
  optionLine("  --version", "print the version and exit");
  optionLine("  --help", "show this text");
  return out;
}

std::optional<int> Parser::parse(int argc, const char *const *argv) {
  bool positionalOnly = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (positionalOnly || arg == "-" || arg.empty() || arg[0] != '-') {
      if (!positional_)
        return usageError("unexpected argument '" + arg + "'");
      std::string reason;
      if (!positional_(arg, reason))
        return usageError(arg + ": " + reason);
      continue;
    }
    if (arg == "--" && positional_) {
      positionalOnly = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::fputs(help().c_str(), stdout);
      return 0;
    }
    if (arg == "--version") {
      std::string line = versionLine() + "\n";
      if (versionDetails_)
        line += versionDetails_();
      std::fputs(line.c_str(), stdout);
      return 0;
    }
    std::string name, value;
    bool hasValue = false;
    if (arg.rfind("--", 0) == 0) {
      name = arg.substr(2);
      if (size_t eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        hasValue = true;
      }
    } else {
      name = arg.substr(1); // "-steps": suggest the option it resembles.
    }
    const Option *o = arg.rfind("--", 0) == 0 ? find(name) : nullptr;
    if (!o) {
      std::string message = "unknown option '" + arg.substr(0, arg.find('=')) + "'";
      if (auto suggestion = nearest(name))
        message += "; did you mean '--" + *suggestion + "'?";
      return usageError(message);
    }
    if (o->flag) {
      if (hasValue)
        return usageError("option '--" + name + "' takes no value");
      *o->flag = true;
      given_.push_back("--" + name);
      continue;
    }
    if (!hasValue) {
      if (i + 1 >= argc)
        return usageError("option '--" + name + "' needs a value (" + o->valueName + ")");
      value = argv[++i];
    }
    std::string reason;
    if (!o->accept(value, reason))
      return usageError("--" + name + " " + (value.empty() ? "''" : value) + ": " + reason);
    given_.push_back("--" + name + "=" + value);
  }
  return std::nullopt;
}

} // namespace tessel::rt::cli
