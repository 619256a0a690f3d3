//===- ParserImpl.h - Shared by the parser and the AST builder --*- C++ -*-===//
//
// Parsing is split in two: Parser.cpp runs ANTLR on a file, guarded against hostile input, and
// reports its syntax errors; AstBuilder.cpp converts the parse tree into the AST of AST.h.
// Both locate what they report with the same mapping from ANTLR's positions to ours.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_PARSERIMPL_H
#define TESSEL_FRONTEND_PARSERIMPL_H

#include "tessel/Frontend/AST.h"
#include "tessel/Frontend/Diagnostics.h"
#include "tessel/Frontend/Source.h"

#include "TesselParser.h"
#include "antlr4-runtime.h"

#include <algorithm>
#include <memory>

namespace tessel::detail {

/// Converts ANTLR positions (1-based line, 0-based column in code points) to ours (1-based
/// column in bytes, which is what the quoted line is indexed by).
class LocMapper {
public:
  LocMapper(const SourceFile &file, int fileId) : file_(file), fileId_(fileId) {}

  SourceLoc at(size_t line, size_t codePointCol, size_t lengthInCodePoints = 1) const {
    std::string_view text = file_.line(static_cast<uint32_t>(line));
    // Walk from the position found last time, not from the start of the line: on a
    // one-line file of a million terms, rescanning the line for every location is quadratic.
    if (line != cachedLine_ || cachedByte_ > text.size()) {
      cachedLine_ = line;
      cachedByte_ = cachedCp_ = 0;
    }
    size_t byte = cachedByte_, cp = cachedCp_;
    while (cp > codePointCol && byte > 0) {
      --byte; // Back over continuation bytes to the start of the previous code point.
      while (byte > 0 && (static_cast<unsigned char>(text[byte]) & 0xc0) == 0x80)
        --byte;
      --cp;
    }
    while (byte < text.size() && cp < codePointCol) {
      byte += utf8Length(static_cast<unsigned char>(text[byte]));
      ++cp;
    }
    cachedByte_ = byte;
    cachedCp_ = cp;
    SourceLoc loc;
    loc.file = fileId_;
    loc.line = static_cast<uint32_t>(line);
    loc.col = static_cast<uint32_t>(byte + 1);
    loc.length = static_cast<uint32_t>(std::max<size_t>(1, lengthInCodePoints));
    return loc;
  }

  SourceLoc of(const antlr4::Token *token) const {
    if (!token)
      return at(1, 0);
    size_t len = token->getType() == antlr4::Token::EOF
                     ? 1
                     : token->getStopIndex() - token->getStartIndex() + 1;
    return at(token->getLine(), token->getCharPositionInLine(), len);
  }

  /// The location of a whole rule: its first token, underlined to the end of its last token
  /// when both are on one line.
  SourceLoc of(antlr4::ParserRuleContext *ctx) const {
    SourceLoc loc = of(ctx->getStart());
    const antlr4::Token *stop = ctx->getStop();
    const antlr4::Token *start = ctx->getStart();
    if (stop && start && stop->getLine() == start->getLine() &&
        stop->getStopIndex() >= start->getStartIndex() && stop->getType() != antlr4::Token::EOF)
      loc.length = static_cast<uint32_t>(stop->getStopIndex() - start->getStartIndex() + 1);
    return loc;
  }

  static size_t utf8Length(unsigned char lead) {
    if (lead < 0x80)
      return 1;
    if ((lead >> 5) == 0x6)
      return 2;
    if ((lead >> 4) == 0xe)
      return 3;
    return 4;
  }

private:
  const SourceFile &file_;
  int fileId_;
  mutable size_t cachedLine_ = 0, cachedByte_ = 0, cachedCp_ = 0;
};

/// Builds the AST of a parsed file from ANTLR's parse tree, bounding the nesting of its
/// expressions at `maxDepth` (ParseLimits::maxExprDepth).
std::unique_ptr<ast::File> buildAst(grammar::TesselParser::FileContext *ctx, int fileId,
                                    const LocMapper &locs, DiagnosticEngine &diags,
                                    unsigned maxDepth);

} // namespace tessel::detail

#endif // TESSEL_FRONTEND_PARSERIMPL_H
