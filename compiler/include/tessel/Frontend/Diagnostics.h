//===- Diagnostics.h - Located errors for the spec language -----*- C++ -*-===//
//
// Every problem in a `.model` file is reported as
//
//   file:line:col: error: message
//      12 |   x: [batch, seq, embd]
//         |                   ^~~~
//   hint: did you mean 'embed'?
//
// Errors are collected rather than thrown so that independent mistakes are reported together.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_DIAGNOSTICS_H
#define TESSEL_FRONTEND_DIAGNOSTICS_H

#include "tessel/Frontend/Source.h"

#include <ostream>
#include <string>
#include <vector>

namespace tessel {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  SourceLoc loc;
  std::string message;
  std::string hint;
};

class DiagnosticEngine {
public:
  explicit DiagnosticEngine(const SourceManager &sources) : sources_(sources) {}

  /// Reports an error. A non-empty `hint` is printed below the quoted line.
  void error(SourceLoc loc, std::string message, std::string hint = "");
  void warning(SourceLoc loc, std::string message, std::string hint = "");
  /// Attaches a note to the diagnostic reported last (e.g. "instantiated here").
  void note(SourceLoc loc, std::string message);

  unsigned errorCount() const { return errors_; }
  bool hasErrors() const { return errors_ > 0; }
  const std::vector<Diagnostic> &diagnostics() const { return diags_; }

  /// Past this many errors the engine keeps counting but stops recording, so that a file of
  /// ten million bad tokens cannot exhaust memory or flood the terminal.
  static constexpr unsigned kMaxRecordedErrors = 50;

  /// Prints the recorded diagnostics from index `first` on, in order, and a final count line
  /// when errors were cut. A driver that reports in stages prints each stage's diagnostics
  /// from where the last stage's stopped.
  void print(std::ostream &os, size_t first = 0) const;
  /// Formats one diagnostic with its quoted source line.
  std::string format(const Diagnostic &diag) const;

private:
  void report(Severity severity, SourceLoc loc, std::string message, std::string hint);

  const SourceManager &sources_;
  std::vector<Diagnostic> diags_;
  unsigned errors_ = 0;
  bool droppingNotes_ = false;
};

/// The candidate closest to `name` by edit distance, or "" when none is close enough to be a
/// likely typo. Used for "did you mean" hints.
std::string closestMatch(const std::string &name, const std::vector<std::string> &candidates);

} // namespace tessel

#endif // TESSEL_FRONTEND_DIAGNOSTICS_H
