//===- Parser.cpp - From .model text to the syntax tree -------------------===//
//
// ANTLR does the parsing; this file guards it against hostile input (invalid UTF-8, deep
// nesting, floods of errors), turns its messages into located diagnostics, and converts the
// parse tree into the AST of AST.h.
//
//===----------------------------------------------------------------------===//

#include "tessel/Frontend/Parser.h"

#include "TesselLexer.h"
#include "TesselParser.h"
#include "antlr4-runtime.h"

#include <algorithm>

using namespace tessel;
using tessel::grammar::TesselLexer;
using tessel::grammar::TesselParser;

namespace {

/// Thrown to abandon a parse that can no longer produce useful diagnostics.
struct ParseAbandoned {};

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

/// Builds the AST from ANTLR's parse tree. Nodes left incomplete by error recovery are
/// skipped; the syntax error has already been reported.
class AstBuilder {
public:
  AstBuilder(const LocMapper &locs, DiagnosticEngine &diags, unsigned maxDepth)
      : locs_(locs), diags_(diags), maxDepth_(maxDepth) {}

  std::unique_ptr<ast::File> build(TesselParser::FileContext *ctx, int fileId) {
    auto file = std::make_unique<ast::File>();
    file->fileId = fileId;
    for (auto *item : ctx->item()) {
      if (auto *imp = item->importDecl()) {
        if (imp->STRING())
          file->imports.push_back({unquote(imp->STRING()->getText()), locs_.of(imp->STRING()->getSymbol())});
      } else if (auto *block = item->blockDecl()) {
        if (auto b = buildBlock(block))
          file->blocks.push_back(std::move(*b));
      } else if (auto *model = item->modelDecl()) {
        file->models.push_back(buildModel(model));
      } else if (auto *section = item->sectionDecl()) {
        ast::Section s;
        s.kind = {section->kind ? section->kind->getText() : "", locs_.of(section->kind)};
        for (auto *setting : section->setting())
          if (auto built = buildSetting(setting))
            s.settings.push_back(std::move(*built));
        file->sections.push_back(std::move(s));
      }
    }
    return file;
  }

private:
  ast::Ident ident(antlr4::Token *token) const {
    if (!token)
      return {"", {}};
    return {token->getText(), locs_.of(token)};
  }
  ast::Ident ident(antlr4::tree::TerminalNode *node) const {
    return node ? ident(node->getSymbol()) : ast::Ident{"", {}};
  }

  static std::string unquote(const std::string &quoted) {
    std::string out;
    for (size_t i = 1; i + 1 < quoted.size(); ++i) {
      char c = quoted[i];
      if (c == '\\' && i + 2 < quoted.size()) {
        char e = quoted[++i];
        out.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
        continue;
      }
      out.push_back(c);
    }
    return out;
  }

  ast::Model buildModel(TesselParser::ModelDeclContext *ctx) {
    ast::Model model;
    model.name = ident(ctx->name);
    for (auto *item : ctx->modelItem()) {
      if (auto *dims = item->dimsDecl()) {
        for (auto *def : dims->dimDef())
          if (def->name && def->expr())
            model.dims.push_back({ident(def->name), buildExpr(def->expr())});
      } else if (auto *c = item->constDecl()) {
        if (c->name && c->expr())
          model.constants.push_back({ident(c->name), buildExpr(c->expr())});
      } else if (auto *block = item->blockDecl()) {
        if (auto b = buildBlock(block))
          model.blocks.push_back(std::move(*b));
      } else if (auto *fwd = item->forwardDecl()) {
        if (model.forward) {
          model.forwardDuplicates.push_back(locs_.of(fwd->getStart()));
          continue;
        }
        ast::Forward f;
        f.loc = locs_.of(fwd->getStart());
        if (fwd->paramList())
          f.args = buildTypedNames(fwd->paramList());
        f.result = ident(fwd->result);
        if (fwd->body())
          f.body = buildBody(fwd->body());
        model.forward = std::move(f);
      }
    }
    return model;
  }

  std::optional<ast::Block> buildBlock(TesselParser::BlockDeclContext *ctx) {
    if (!ctx->name || !ctx->result || !ctx->body())
      return std::nullopt;
    ast::Block b;
    b.name = ident(ctx->name);
    if (ctx->paramList())
      b.args = buildTypedNames(ctx->paramList());
    b.result = buildType(ctx->result);
    b.body = buildBody(ctx->body());
    return b;
  }

  std::vector<ast::TypedName> buildTypedNames(TesselParser::ParamListContext *ctx) {
    std::vector<ast::TypedName> out;
    for (auto *tn : ctx->typedName())
      if (tn->name && tn->typeExpr())
        out.push_back({ident(tn->name), buildType(tn->typeExpr())});
    return out;
  }

  ast::TypeExpr buildType(TesselParser::TypeExprContext *ctx) {
    ast::TypeExpr t;
    t.loc = locs_.of(ctx);
    if (ctx->dtype)
      t.dtype = ident(ctx->dtype);
    for (auto *id : ctx->ID())
      if (!ctx->dtype || id->getSymbol() != ctx->dtype)
        t.dims.push_back(ident(id));
    return t;
  }

  std::vector<ast::StmtPtr> buildBody(TesselParser::BodyContext *ctx) {
    std::vector<ast::StmtPtr> out;
    for (auto *s : ctx->stmt())
      if (auto stmt = buildStmt(s))
        out.push_back(std::move(stmt));
    return out;
  }

  ast::StmtPtr buildStmt(TesselParser::StmtContext *ctx) {
    auto stmt = std::make_unique<ast::Stmt>();
    stmt->loc = locs_.of(ctx->getStart());
    if (auto *p = ctx->paramStmt()) {
      if (!p->name || !p->typeExpr())
        return nullptr;
      stmt->kind = ast::StmtKind::Param;
      stmt->name = ident(p->name);
      stmt->type = buildType(p->typeExpr());
      if (p->init)
        stmt->value = buildExpr(p->init);
      return stmt;
    }
    if (auto *r = ctx->returnStmt()) {
      if (!r->expr())
        return nullptr;
      stmt->kind = ast::StmtKind::Return;
      stmt->value = buildExpr(r->expr());
      return stmt;
    }
    if (auto *r = ctx->repeatStmt()) {
      if (!r->count || !r->body())
        return nullptr;
      stmt->kind = ast::StmtKind::Repeat;
      stmt->value = buildExpr(r->count);
      stmt->body = buildBody(r->body());
      return stmt;
    }
    if (auto *a = ctx->assignStmt()) {
      if (!a->name || !a->expr())
        return nullptr;
      stmt->kind = ast::StmtKind::Assign;
      stmt->name = ident(a->name);
      stmt->value = buildExpr(a->expr());
      return stmt;
    }
    if (auto *c = ctx->callStmt()) {
      if (!c->callee)
        return nullptr;
      stmt->kind = ast::StmtKind::Expr;
      stmt->value = buildCall(c->callee, c->argList());
      return stmt;
    }
    return nullptr;
  }

  std::optional<ast::Setting> buildSetting(TesselParser::SettingContext *ctx) {
    ast::Setting s;
    if (auto *v = dynamic_cast<TesselParser::ValueSettingContext *>(ctx)) {
      if (!v->key || !v->expr())
        return std::nullopt;
      s.key = ident(v->key);
      s.value = buildExpr(v->expr());
      return s;
    }
    if (auto *g = dynamic_cast<TesselParser::GroupSettingContext *>(ctx)) {
      if (!g->key)
        return std::nullopt;
      s.key = ident(g->key);
      for (auto *inner : g->setting())
        if (auto built = buildSetting(inner))
          s.group.push_back(std::move(*built));
      return s;
    }
    return std::nullopt;
  }

  ast::ExprPtr make(ast::ExprKind kind, SourceLoc loc, std::string text = "") {
    auto e = std::make_unique<ast::Expr>();
    e->kind = kind;
    e->loc = loc;
    e->text = std::move(text);
    return e;
  }

  /// Builds an expression; returns a Name expression with empty text for pieces that error
  /// recovery left out, so that callers never see null.
  ast::ExprPtr buildExpr(TesselParser::ExprContext *ctx) {
    if (!ctx)
      return make(ast::ExprKind::Name, {});
    // Chains such as `a + a + ... + a` parse iteratively but nest in the tree; bound them
    // here so nothing downstream recurses without limit.
    struct DepthScope {
      unsigned &d;
      explicit DepthScope(unsigned &d) : d(++d) {}
      ~DepthScope() { --d; }
    } scope(depth_);
    if (depth_ > maxDepth_) {
      if (!reportedDepth_)
        diags_.error(locs_.of(ctx->getStart()), "expression has more than " +
                                                    std::to_string(maxDepth_) +
                                                    " nested operations",
                     "split it into several assignments");
      reportedDepth_ = true;
      return make(ast::ExprKind::Name, locs_.of(ctx->getStart()));
    }
    if (auto *p = dynamic_cast<TesselParser::PrimaryExprContext *>(ctx))
      return buildPrimary(p->primary());
    if (auto *n = dynamic_cast<TesselParser::NegExprContext *>(ctx)) {
      auto e = make(ast::ExprKind::Neg, locs_.of(n->op));
      e->operands.push_back(buildExpr(n->expr()));
      return e;
    }
    antlr4::Token *op = nullptr;
    TesselParser::ExprContext *lhs = nullptr, *rhs = nullptr;
    if (auto *m = dynamic_cast<TesselParser::MulExprContext *>(ctx)) {
      op = m->op;
      lhs = m->lhs;
      rhs = m->rhs;
    } else if (auto *a = dynamic_cast<TesselParser::AddExprContext *>(ctx)) {
      op = a->op;
      lhs = a->lhs;
      rhs = a->rhs;
    } else if (auto *c = dynamic_cast<TesselParser::CompareExprContext *>(ctx)) {
      op = c->op;
      lhs = c->lhs;
      rhs = c->rhs;
      if (dynamic_cast<TesselParser::CompareExprContext *>(lhs) && op)
        diags_.error(locs_.of(op), "comparisons do not chain",
                     "combine masks with '*': (a < b) * (b < c)");
    }
    if (!op)
      return make(ast::ExprKind::Name, locs_.of(ctx->getStart()));
    auto e = make(ast::ExprKind::Binary, locs_.of(op), op->getText());
    e->operands.push_back(buildExpr(lhs));
    e->operands.push_back(buildExpr(rhs));
    return e;
  }

  /// `callee(args)`, in an expression or as a statement.
  ast::ExprPtr buildCall(antlr4::Token *callee, TesselParser::ArgListContext *args) {
    auto e = make(ast::ExprKind::Call, locs_.of(callee), callee ? callee->getText() : "");
    if (args)
      for (auto *arg : args->arg()) {
        e->keys.push_back(arg->key ? arg->key->getText() : "");
        e->keyLocs.push_back(arg->key ? locs_.of(arg->key) : SourceLoc{});
        e->operands.push_back(buildExpr(arg->expr()));
      }
    return e;
  }

  ast::ExprPtr buildPrimary(TesselParser::PrimaryContext *ctx) {
    if (!ctx)
      return make(ast::ExprKind::Name, {});
    SourceLoc loc = locs_.of(ctx->getStart());
    if (auto *n = dynamic_cast<TesselParser::NumberLitContext *>(ctx))
      return make(ast::ExprKind::Number, loc, n->getText());
    if (auto *s = dynamic_cast<TesselParser::StringLitContext *>(ctx))
      return make(ast::ExprKind::String, loc, unquote(s->getText()));
    if (auto *n = dynamic_cast<TesselParser::NameRefContext *>(ctx))
      return make(ast::ExprKind::Name, loc, n->getText());
    if (auto *c = dynamic_cast<TesselParser::CallExprContext *>(ctx))
      return buildCall(c->callee, c->argList());
    if (auto *p = dynamic_cast<TesselParser::ParenExprContext *>(ctx)) {
      if (!p->tupleComma)
        return buildExpr(p->expr(0));
      auto e = make(ast::ExprKind::Tuple, loc);
      for (auto *x : p->expr())
        e->operands.push_back(buildExpr(x));
      return e;
    }
    if (auto *l = dynamic_cast<TesselParser::ListExprContext *>(ctx)) {
      auto e = make(ast::ExprKind::List, loc);
      for (auto *x : l->expr())
        e->operands.push_back(buildExpr(x));
      return e;
    }
    return make(ast::ExprKind::Name, loc);
  }

  const LocMapper &locs_;
  DiagnosticEngine &diags_;
  unsigned maxDepth_;
  unsigned depth_ = 0;
  bool reportedDepth_ = false;
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
    return AstBuilder(locs, diags, limits.maxExprDepth).build(tree, fileId);
  } catch (const ParseAbandoned &) {
    if (guard.offending)
      diags.error(locs.of(guard.offending),
                  "expression nested more than " + std::to_string(limits.maxNesting) + " deep");
  } catch (const std::exception &e) {
    diags.error(start, std::string("cannot parse this file: ") + e.what());
  }
  return empty;
}
