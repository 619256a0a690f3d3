//===- Parser.h - From .model text to the syntax tree -----------*- C++ -*-===//
#ifndef TESSEL_FRONTEND_PARSER_H
#define TESSEL_FRONTEND_PARSER_H

#include "tessel/Frontend/AST.h"
#include "tessel/Frontend/Diagnostics.h"

#include <memory>

namespace tessel {

/// Limits that keep hostile input from exhausting the stack or memory. Exceeding one is a
/// located error, never a crash.
struct ParseLimits {
  /// Deepest nesting of rules (parentheses, unary minus, groups) the parser accepts.
  unsigned maxNesting = 200;
  /// Deepest expression tree accepted (long operator chains nest in the tree).
  unsigned maxExprDepth = 1000;
  /// Largest file accepted, in bytes.
  size_t maxFileBytes = 64u << 20;
};

/// Parses file `fileId` of `sources`. Syntax errors go to `diags`; the returned tree holds
/// whatever could be recovered (it is never null).
std::unique_ptr<ast::File> parseFile(const SourceManager &sources, int fileId,
                                     DiagnosticEngine &diags, const ParseLimits &limits = {});

} // namespace tessel

#endif // TESSEL_FRONTEND_PARSER_H
