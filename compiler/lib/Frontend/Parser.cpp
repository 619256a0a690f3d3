//===- Parser.cpp - From .model text to the syntax tree -------------------===//
//
// ANTLR does the parsing; this file guards it against hostile input (invalid UTF-8, deep
// nesting, floods of errors) and turns its messages into located diagnostics. AstBuilder.cpp
// converts the parse tree into the AST of AST.h.
//
//===----------------------------------------------------------------------===//

#include "tessel/Frontend/Parser.h"

#include "ParserImpl.h"

#include "TesselLexer.h"
#include "TesselParser.h"
#include "antlr4-runtime.h"

#include <algorithm>

using namespace tessel;
using tessel::detail::LocMapper;
using tessel::grammar::TesselLexer;
using tessel::grammar::TesselParser;

namespace {

/// Thrown to abandon a parse that can no longer produce useful diagnostics.
struct ParseAbandoned {};

/// Finds the first byte that is not well-formed UTF-8 (or is a NUL), or npos.
size_t findInvalidUtf8(const std::string &s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0)
      return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c >> 5) == 0x6) {
      n = 2;
      cp = c & 0x1f;
    } else if ((c >> 4) == 0xe) {
      n = 3;
      cp = c & 0x0f;
    } else if ((c >> 3) == 0x1e) {
      n = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + n > s.size())
      return i;
    for (size_t k = 1; k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2)
        return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += n;
  }
  return std::string::npos;
}

/// Rewrites ANTLR's token vocabulary in messages into words a user knows.
std::string friendlyMessage(std::string msg) {
  auto replaceAll = [&](const std::string &from, const std::string &to) {
    for (size_t pos = 0; (pos = msg.find(from, pos)) != std::string::npos; pos += to.size())
      msg.replace(pos, from.size(), to);
  };
  replaceAll("'<EOF>'", "end of file");
  replaceAll("<EOF>", "end of file");
  replaceAll("extraneous input", "unexpected");
  replaceAll("mismatched input", "unexpected");
  replaceAll("no viable alternative at input", "cannot parse");
  replaceAll("token recognition error at:", "unexpected character");
  // "unexpected ')' expected '='" reads as one phrase; separate what was found from what
  // was wanted.
  replaceAll(" expecting", "; expected");
  replaceAll("{ID, ", "{identifier, ");
  replaceAll(", ID}", ", identifier}");
  replaceAll(" ID,", " identifier,");
  replaceAll("expected ID", "expected an identifier");
  replaceAll("NUMBER", "number");
  replaceAll("STRING", "string");
  return msg;
}

class ErrorListener : public antlr4::BaseErrorListener {
public:
  ErrorListener(DiagnosticEngine &diags, const LocMapper &locs) : diags_(diags), locs_(locs) {}

  void syntaxError(antlr4::Recognizer *, antlr4::Token *offending, size_t line,
                   size_t charPositionInLine, const std::string &msg,
                   std::exception_ptr error) override {
    size_t length = 1;
    if (offending && offending->getType() != antlr4::Token::EOF)
      length = offending->getStopIndex() - offending->getStartIndex() + 1;
    std::string hint;
    if (offending && offending->getType() == TesselLexer::UNKNOWN)
      hint = "comments start with '#'; strings are written in double quotes";
    std::string message = friendlyMessage(msg);
    if (std::string quoted = failedDecisionText(offending, error); !quoted.empty())
      message = "cannot parse '" + quoted + "'";
    diags_.error(locs_.at(line, charPositionInLine, length), message, hint);
    if (++count_ >= kMaxSyntaxErrors) {
      diags_.note({}, "too many syntax errors; giving up on this file");
      throw ParseAbandoned{};
    }
  }

private:
  /// ANTLR quotes the tokens of a decision that found no alternative without the whitespace
  /// between them (`batch 4` becomes 'batch4'); this quotes the source text instead, with
  /// whitespace runs made single spaces. Empty for other errors.
  static std::string failedDecisionText(antlr4::Token *offending, std::exception_ptr error) {
    if (!error || !offending || offending->getType() == antlr4::Token::EOF)
      return "";
    const antlr4::Token *start = nullptr;
    try {
      std::rethrow_exception(error);
    } catch (const antlr4::NoViableAltException &e) {
      start = e.getStartToken();
    } catch (...) {
    }
    if (!start || start->getStartIndex() > offending->getStopIndex())
      return "";
    std::string text = offending->getInputStream()->getText(
        antlr4::misc::Interval(start->getStartIndex(), offending->getStopIndex()));
    std::string out;
    for (char c : text) {
      bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n';
      if (!space)
        out.push_back(c);
      else if (!out.empty() && out.back() != ' ')
        out.push_back(' ');
    }
    constexpr size_t kMaxQuoted = 40;
    if (out.size() > kMaxQuoted) {
      size_t from = out.size() - kMaxQuoted;
      while (from < out.size() && (static_cast<unsigned char>(out[from]) & 0xc0) == 0x80)
        ++from; // Not inside a UTF-8 sequence.
      out = "..." + out.substr(from);
    }
    return out;
  }

  static constexpr unsigned kMaxSyntaxErrors = 20;
  DiagnosticEngine &diags_;
  const LocMapper &locs_;
  unsigned count_ = 0;
};

/// Bounds the parser's recursion: every nested rule is one more C++ frame.
class NestingGuard : public antlr4::tree::ParseTreeListener {
public:
  NestingGuard(TesselParser &parser, unsigned maxDepth) : parser_(parser), maxDepth_(maxDepth) {}

  void enterEveryRule(antlr4::ParserRuleContext *ctx) override {
    if (ctx->depth() > static_cast<int>(maxDepth_)) {
      offending = parser_.getCurrentToken();
      throw ParseAbandoned{};
    }
  }
  void exitEveryRule(antlr4::ParserRuleContext *) override {}
  void visitTerminal(antlr4::tree::TerminalNode *) override {}
  void visitErrorNode(antlr4::tree::ErrorNode *) override {}

  antlr4::Token *offending = nullptr;

private:
  TesselParser &parser_;
  unsigned maxDepth_;
};

/// Checks bracket nesting on the token stream before parsing, so that the parser's adaptive
/// prediction never has to look through a pathologically deep expression.
bool checkBracketNesting(antlr4::CommonTokenStream &tokens, const LocMapper &locs,
                         unsigned maxNesting, DiagnosticEngine &diags) {
  unsigned depth = 0;
  for (antlr4::Token *t : tokens.getTokens()) {
    const std::string text = t->getType() == antlr4::Token::EOF ? "" : t->getText();
    if (text == "(" || text == "[" || text == "{") {
      if (++depth > maxNesting) {
        diags.error(locs.of(t), "brackets nested more than " + std::to_string(maxNesting) +
                                    " deep");
        return false;
      }
    } else if ((text == ")" || text == "]" || text == "}") && depth > 0) {
      --depth;
    }
  }
  return true;
}

} // namespace

std::unique_ptr<ast::File> tessel::parseFile(const SourceManager &sources, int fileId,
                                             DiagnosticEngine &diags, const ParseLimits &limits) {
  const SourceFile &file = sources.file(fileId);
  auto empty = std::make_unique<ast::File>();
  empty->fileId = fileId;
  SourceLoc start{fileId, 1, 1, 1};

  if (file.text().size() > limits.maxFileBytes) {
    diags.error(start, "file is " + std::to_string(file.text().size()) +
                           " bytes; the limit for a .model file is " +
                           std::to_string(limits.maxFileBytes));
    return empty;
  }
  size_t bad = findInvalidUtf8(file.text());
  if (bad != std::string::npos) {
    size_t line = 1 + std::count(file.text().begin(), file.text().begin() + bad, '\n');
    size_t lineStart = file.text().rfind('\n', bad == 0 ? 0 : bad - 1);
    lineStart = (lineStart == std::string::npos || bad == 0) ? 0 : lineStart + 1;
    SourceLoc loc{fileId, static_cast<uint32_t>(line), static_cast<uint32_t>(bad - lineStart + 1), 1};
    diags.error(loc, file.text()[bad] == '\0' ? "file contains a NUL byte; is it a binary file?"
                                              : "file is not valid UTF-8 text",
                "a .model file is UTF-8 text");
    return empty;
  }

  LocMapper locs(file, fileId);
  antlr4::ANTLRInputStream input(file.text());
  input.name = file.path();
  TesselLexer lexer(&input);
  antlr4::CommonTokenStream tokens(&lexer);
  ErrorListener listener(diags, locs);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);

  TesselParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  NestingGuard guard(parser, limits.maxNesting);
  parser.addParseListener(&guard);

  try {
    tokens.fill();
    if (!checkBracketNesting(tokens, locs, limits.maxNesting, diags))
      return empty;
    TesselParser::FileContext *tree = parser.file();
    return detail::buildAst(tree, fileId, locs, diags, limits.maxExprDepth);
  } catch (const ParseAbandoned &) {
    if (guard.offending)
      diags.error(locs.of(guard.offending),
                  "expression nested more than " + std::to_string(limits.maxNesting) + " deep");
  } catch (const std::exception &e) {
    diags.error(start, std::string("cannot parse this file: ") + e.what());
  }
  return empty;
}
