//===- ChatTemplateParser.h - The parser of chat templates ------*- C++ -*-===//
//
// The recursive-descent parser over a template's tokens, as jinja2/parser.py: the class both
// halves of the grammar share, its token helpers and its nesting bounds. Its statements (if,
// for, set, macro, generation, break, continue) are read in ChatTemplateParser.cpp, its
// expressions in ChatTemplateExpressions.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATEPARSER_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATEPARSER_H

#include "common/tokenizer/ChatTemplateLexer.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace tessel::tok::chat {

// Nesting of blocks and of expressions: far beyond any real template, shallow enough that
// parsing and rendering stay far from the stack's end.
constexpr int kMaxBlockDepth = 64;
constexpr int kMaxExprDepth = 96;

/// Recursive descent over the tokens, as jinja2/parser.py.
class Parser {
public:
  Parser(const std::vector<Token> &tokens, Template &out) : t_(tokens), out_(out) {}

  bool run(std::string &error) {
    std::string end;
    if (!body(out_.body, {}, end))
      return finish(error);
    return true;
  }

private:
  const std::vector<Token> &t_;
  Template &out_;
  size_t p_ = 0;
  int blockDepth_ = 0, exprDepth_ = 0, loopDepth_ = 0;
  std::string error_;

  bool finish(std::string &error) {
    error = error_;
    return false;
  }

  const Token &cur() const { return t_[p_]; }
  const Token &look() const { return t_[std::min(p_ + 1, t_.size() - 1)]; }
  void next() {
    if (p_ + 1 < t_.size())
      ++p_;
  }
  bool isOp(const char *op) const { return cur().type == Tok::Op && cur().text == op; }
  bool isName(const char *name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skipOp(const char *op) {
    if (!isOp(op))
      return false;
    next();
    return true;
  }
  bool skipName(const char *name) {
    if (!isName(name))
      return false;
    next();
    return true;
  }

  bool fail(Location at, const std::string &what) {
    if (error_.empty())
      error_ =
          "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " + what;
    return false;
  }
  bool unexpected(const std::string &expected) {
    return fail(cur().at, "expected " + expected + ", found " + describeToken(cur()));
  }
  bool expectOp(const char *op) { return skipOp(op) || unexpected(std::string("'") + op + "'"); }
  bool expectName(std::string &name) {
    if (cur().type != Tok::Name)
      return unexpected("a name");
    name = cur().text;
    next();
    return true;
  }
  bool expectBlockEnd() {
    skipOp(":");
    if (cur().type != Tok::BlockEnd)
      return unexpected("the end of the statement ('%}')");
    next();
    return true;
  }

  ExprPtr make(Expr::Kind kind, Location at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->at = at;
    return e;
  }
  // ---- Statements (ChatTemplateParser.cpp) ----

  bool body(Body &into, std::initializer_list<const char *> ends, std::string &end,
            Location opener = {}, const char *what = nullptr);
  bool statement(Body &into);
  bool parseIf(Node &n);
  bool assignTarget(Target &target, bool withNamespace, const char *endName);
  bool parseFor(Node &n);
  bool parseSet(Node &n);
  bool parseMacro(Node &n);
  bool parseGeneration(Node &n);

  // ---- Expressions (ChatTemplateExpressions.cpp) ----

  bool isTupleEnd(std::initializer_list<const char *> extraEnds) const;
  bool tuple(ExprPtr &out, bool withCondition, std::initializer_list<const char *> extraEnds,
             bool explicitParens = false);
  bool expression(ExprPtr &out, bool withCondition);
  bool condition(ExprPtr &out);
  bool binaryNode(ExprPtr &out, Expr::Op op, bool (Parser::*operand)(ExprPtr &));
  bool binaryChain(ExprPtr &out, Expr::Op op, const char *name, bool (Parser::*operand)(ExprPtr &));
  bool orExpr(ExprPtr &out);
  bool andExpr(ExprPtr &out);
  bool notExpr(ExprPtr &out);
  bool compare(ExprPtr &out);
  bool arithmetic(ExprPtr &out, std::initializer_list<std::pair<const char *, Expr::Op>> ops,
                  bool (Parser::*operand)(ExprPtr &));
  bool math1(ExprPtr &out);
  bool concat(ExprPtr &out);
  bool math2(ExprPtr &out);
  bool power(ExprPtr &out);
  bool unaryFiltered(ExprPtr &out);
  bool unary(ExprPtr &out, bool withFilter);
  bool unaryInner(ExprPtr &out, bool withFilter);
  bool primary(ExprPtr &out);
  bool list(ExprPtr &out);
  bool dict(ExprPtr &out);
  bool postfix(ExprPtr &out);
  bool subscript(ExprPtr &out);
  bool callArgs(Expr &e);
  bool call(ExprPtr &out);
  bool dottedName(std::string &name);
  bool filterExpr(ExprPtr &out);
};

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATEPARSER_H
