//===- ChatTemplateParser.cpp - Chat templates' text to their tree --------===//
//
// Jinja's parser for the subset chat templates use: statements (if, for, set, macro,
// generation, break, continue) and expressions with jinja2/parser.py's grammar and
// precedences, so a template parses here as it does there. What the subset leaves out is
// refused by name, as are unknown filters and tests (Jinja checks those when it compiles).
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateLexer.h"

#include <algorithm>
#include <cstring>

namespace tessel::tok::chat {

namespace {

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

  // Statements until a block tag named in `ends`; `end` gets the name found (its tag is
  // consumed up to the name).
  bool body(Body &into, std::initializer_list<const char *> ends, std::string &end,
            Location opener = {}, const char *what = nullptr) {
    while (true) {
      const Token &tok = cur();
      switch (tok.type) {
      case Tok::End:
        if (ends.size() == 0)
          return true;
        {
          std::string expected;
          for (const char *e : ends)
            expected += std::string(expected.empty() ? "" : " or ") + "'" + e + "'";
          return fail(opener, std::string("the '") + what +
                                  "' is not closed: the template ends "
                                  "without " +
                                  expected);
        }
      case Tok::Data: {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Text;
        n->at = tok.at;
        n->text = tok.text;
        into.push_back(std::move(n));
        next();
        break;
      }
      case Tok::VarBegin: {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::Output;
        n->at = tok.at;
        next();
        if (!tuple(n->expr, true, {}))
          return false;
        if (cur().type != Tok::VarEnd)
          return unexpected("the end of the expression ('}}')");
        next();
        into.push_back(std::move(n));
        break;
      }
      case Tok::BlockBegin: {
        const Token &name = look();
        if (name.type == Tok::Name)
          for (const char *e : ends)
            if (name.text == e) {
              end = e;
              next();
              next();
              return true;
            }
        if (!statement(into))
          return false;
        break;
      }
      default:
        return unexpected("template data or a tag");
      }
    }
  }

  bool statement(Body &into) {
    next(); // {%
    if (cur().type != Tok::Name)
      return unexpected("a statement name");
    Location at = cur().at;
    std::string name = cur().text;
    if (++blockDepth_ > kMaxBlockDepth)
      return fail(at, "blocks nest deeper than " + std::to_string(kMaxBlockDepth) + " levels");
    auto n = std::make_unique<Node>();
    n->at = at;
    next();
    bool ok;
    if (name == "if")
      ok = parseIf(*n);
    else if (name == "for")
      ok = parseFor(*n);
    else if (name == "set")
      ok = parseSet(*n);
    else if (name == "macro")
      ok = parseMacro(*n);
    else if (name == "generation")
      ok = parseGeneration(*n);
    else if (name == "break" || name == "continue") {
      if (!loopDepth_)
        return fail(at, "'" + name + "' outside a for loop");
      n->kind = name == "break" ? Node::Kind::Break : Node::Kind::Continue;
      ok = expectBlockEnd();
    } else {
      static const char *const kClosers[] = {"elif",   "else",     "endif",        "endfor",
                                             "endset", "endmacro", "endgeneration"};
      for (const char *s : kClosers)
        if (name == s)
          return fail(at, "'{% " + name + " %}' closes no open block");
      static const char *const kLeftOut[] = {
          "call",  "filter", "with",       "include", "import", "from",      "extends",
          "block", "raw",    "autoescape", "do",      "trans",  "pluralize", "endraw"};
      for (const char *s : kLeftOut)
        if (name == s)
          return fail(at, "'{% " + name + " %}' is outside the supported subset of Jinja");
      return fail(at, "unknown statement '" + name + "'");
    }
    --blockDepth_;
    if (ok)
      into.push_back(std::move(n));
    return ok;
  }

  bool parseIf(Node &n) {
    n.kind = Node::Kind::If;
    while (true) {
      ExprPtr cond;
      if (!tuple(cond, false, {}) || !expectBlockEnd())
        return false;
      n.conditions.push_back(std::move(cond));
      n.bodies.emplace_back();
      std::string end;
      if (!body(n.bodies.back(), {"elif", "else", "endif"}, end, n.at, "if"))
        return false;
      if (end == "elif")
        continue;
      if (end == "else") {
        n.bodies.emplace_back();
        if (!expectBlockEnd() || !body(n.bodies.back(), {"endif"}, end, n.at, "if"))
          return false;
      }
      return expectBlockEnd();
    }
  }

  bool assignTarget(Target &target, bool withNamespace, const char *endName) {
    if (withNamespace && cur().type == Tok::Name && look().type == Tok::Op && look().text == ".") {
      target.names.push_back(cur().text);
      next();
      next();
      return expectName(target.attribute);
    }
    bool paren = skipOp("(");
    while (true) {
      std::string name;
      if (!expectName(name))
        return false;
      if (name == "true" || name == "false" || name == "none" || name == "True" ||
          name == "False" || name == "None")
        return fail(t_[p_ - 1].at, "cannot assign to '" + name + "'");
      target.names.push_back(name);
      if (!skipOp(","))
        break;
      target.tuple = true;
      if ((paren && isOp(")")) || (endName && isName(endName)) || isOp("="))
        break;
    }
    return !paren || expectOp(")");
  }

  bool parseFor(Node &n) {
    n.kind = Node::Kind::For;
    if (!assignTarget(n.target, false, "in"))
      return false;
    if (!skipName("in"))
      return unexpected("'in'");
    if (!tuple(n.expr, false, {"recursive"}))
      return false;
    if (skipName("if") && !expression(n.filter, true))
      return false;
    if (isName("recursive"))
      return fail(cur().at, "recursive for loops are outside the supported subset");
    if (!expectBlockEnd())
      return false;
    n.bodies.emplace_back();
    std::string end;
    ++loopDepth_;
    bool ok = body(n.bodies.back(), {"endfor", "else"}, end, n.at, "for");
    --loopDepth_;
    if (!ok)
      return false;
    if (end == "else") {
      n.bodies.emplace_back();
      if (!expectBlockEnd() || !body(n.bodies.back(), {"endfor"}, end, n.at, "for"))
        return false;
    }
    return expectBlockEnd();
  }

  bool parseSet(Node &n) {
    n.kind = Node::Kind::Set;
    if (!assignTarget(n.target, true, nullptr))
      return false;
    if (skipOp("="))
      return tuple(n.expr, true, {}) && expectBlockEnd();
    if (isOp("|"))
      return fail(cur().at, "a filter on '{% set %}' blocks is outside the supported subset");
    n.kind = Node::Kind::SetBlock;
    if (!n.target.attribute.empty() || n.target.tuple)
      return fail(n.at, "a '{% set %}' block assigns one name");
    n.bodies.emplace_back();
    std::string end;
    return expectBlockEnd() && body(n.bodies.back(), {"endset"}, end, n.at, "set") &&
           expectBlockEnd();
  }

  bool parseMacro(Node &n) {
    n.kind = Node::Kind::Macro;
    if (!expectName(n.text) || !expectOp("("))
      return false;
    while (!isOp(")")) {
      if (!n.params.empty() && !expectOp(","))
        return false;
      MacroParam param;
      if (!expectName(param.name))
        return false;
      if (skipOp("=")) {
        if (!expression(param.defaultValue, true))
          return false;
      } else if (!n.params.empty() && n.params.back().defaultValue) {
        return fail(t_[p_ - 1].at, "a parameter without a default follows one with a default");
      }
      n.params.push_back(std::move(param));
    }
    next();
    n.bodies.emplace_back();
    std::string end;
    int loops = loopDepth_;
    loopDepth_ = 0; // break and continue do not cross a macro
    bool ok = expectBlockEnd() && body(n.bodies.back(), {"endmacro"}, end, n.at, "macro");
    loopDepth_ = loops;
    return ok && expectBlockEnd();
  }

  bool parseGeneration(Node &n) {
    n.kind = Node::Kind::Generation;
    out_.hasGeneration = true;
    n.bodies.emplace_back();
    std::string end;
    int loops = loopDepth_;
    loopDepth_ = 0; // the block's body runs as a macro (transformers' call block)
    bool ok = expectBlockEnd() && body(n.bodies.back(), {"endgeneration"}, end, n.at, "generation");
    loopDepth_ = loops;
    return ok && expectBlockEnd();
  }

  // ---- Expressions ----

  bool isTupleEnd(std::initializer_list<const char *> extraEnds) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || isOp(")"))
      return true;
    for (const char *e : extraEnds)
      if (isName(e))
        return true;
    return false;
  }

  bool tuple(ExprPtr &out, bool withCondition, std::initializer_list<const char *> extraEnds,
             bool explicitParens = false) {
    Location at = cur().at;
    std::vector<ExprPtr> items;
    bool isTuple = false;
    while (true) {
      if (!items.empty() && !expectOp(","))
        return false;
      if (isTupleEnd(extraEnds))
        break;
      ExprPtr e;
      if (!expression(e, withCondition))
        return false;
      items.push_back(std::move(e));
      if (isOp(","))
        isTuple = true;
      else
        break;
    }
    if (!isTuple) {
      if (!items.empty()) {
        out = std::move(items[0]);
        return true;
      }
      if (!explicitParens)
        return unexpected("an expression");
    }
    out = make(Expr::Kind::TupleLit, at);
    out->args = std::move(items);
    return true;
  }

  bool expression(ExprPtr &out, bool withCondition) {
    if (++exprDepth_ > kMaxExprDepth)
      return fail(cur().at,
                  "the expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
    bool ok = withCondition ? condition(out) : orExpr(out);
    --exprDepth_;
    return ok;
  }

  bool condition(ExprPtr &out) {
    if (!orExpr(out))
      return false;
    while (isName("if")) {
      Location at = cur().at;
      next();
      auto e = make(Expr::Kind::Condition, at);
      ExprPtr test, otherwise;
      if (!orExpr(test))
        return false;
      if (skipName("else") && !expression(otherwise, true))
        return false;
      e->args.push_back(std::move(out));
      e->args.push_back(std::move(test));
      e->args.push_back(std::move(otherwise));
      out = std::move(e);
    }
    return true;
  }

  /// At binary operator `op` (the current token), after its left operand `out`: `out` becomes
  /// the node of `out op right`, the right operand read by `operand`.
  bool binaryNode(ExprPtr &out, Expr::Op op, bool (Parser::*operand)(ExprPtr &)) {
    Location at = cur().at;
    next();
    auto e = make(Expr::Kind::Binary, at);
    e->op = op;
    ExprPtr right;
    if (!(this->*operand)(right))
      return false;
    e->args.push_back(std::move(out));
    e->args.push_back(std::move(right));
    out = std::move(e);
    return true;
  }

  bool binaryChain(ExprPtr &out, Expr::Op op, const char *name,
                   bool (Parser::*operand)(ExprPtr &)) {
    if (!(this->*operand)(out))
      return false;
    while (isName(name))
      if (!binaryNode(out, op, operand))
        return false;
    return true;
  }

  bool orExpr(ExprPtr &out) { return binaryChain(out, Expr::Op::Or, "or", &Parser::andExpr); }
  bool andExpr(ExprPtr &out) { return binaryChain(out, Expr::Op::And, "and", &Parser::notExpr); }

  bool notExpr(ExprPtr &out) {
    if (!isName("not"))
      return compare(out);
    Location at = cur().at;
    next();
    if (++exprDepth_ > kMaxExprDepth)
      return fail(at,
                  "the expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
    auto e = make(Expr::Kind::Unary, at);
    e->op = Expr::Op::Not;
    ExprPtr operand;
    bool ok = notExpr(operand);
    --exprDepth_;
    if (!ok)
      return false;
    e->args.push_back(std::move(operand));
    out = std::move(e);
    return true;
  }

  bool compare(ExprPtr &out) {
    Location at = cur().at;
    ExprPtr first;
    if (!math1(first))
      return false;
    std::unique_ptr<Expr> e;
    while (true) {
      Expr::Op op = Expr::Op::None;
      static const std::pair<const char *, Expr::Op> kOps[] = {
          {"==", Expr::Op::Eq}, {"!=", Expr::Op::Ne}, {"<", Expr::Op::Lt},
          {"<=", Expr::Op::Le}, {">", Expr::Op::Gt},  {">=", Expr::Op::Ge}};
      for (const auto &[text, o] : kOps)
        if (isOp(text))
          op = o;
      if (op != Expr::Op::None) {
        next();
      } else if (isName("in")) {
        op = Expr::Op::In;
        next();
      } else if (isName("not") && look().type == Tok::Name && look().text == "in") {
        op = Expr::Op::NotIn;
        next();
        next();
      } else {
        break;
      }
      if (!e) {
        e = make(Expr::Kind::Compare, at);
        e->args.push_back(std::move(first));
      }
      ExprPtr right;
      if (!math1(right))
        return false;
      e->ops.push_back(op);
      e->args.push_back(std::move(right));
    }
    out = e ? std::move(e) : std::move(first);
    return true;
  }

  bool arithmetic(ExprPtr &out, std::initializer_list<std::pair<const char *, Expr::Op>> ops,
                  bool (Parser::*operand)(ExprPtr &)) {
    if (!(this->*operand)(out))
      return false;
    while (true) {
      Expr::Op op = Expr::Op::None;
      for (const auto &[text, o] : ops)
        if (isOp(text))
          op = o;
      if (op == Expr::Op::None)
        return true;
      if (!binaryNode(out, op, operand))
        return false;
    }
  }

  bool math1(ExprPtr &out) {
    return arithmetic(out, {{"+", Expr::Op::Add}, {"-", Expr::Op::Sub}}, &Parser::concat);
  }

  bool concat(ExprPtr &out) {
    Location at = cur().at;
    if (!math2(out))
      return false;
    if (!isOp("~"))
      return true;
    auto e = make(Expr::Kind::Concat, at);
    e->args.push_back(std::move(out));
    while (skipOp("~")) {
      ExprPtr right;
      if (!math2(right))
        return false;
      e->args.push_back(std::move(right));
    }
    out = std::move(e);
    return true;
  }

  bool math2(ExprPtr &out) {
    return arithmetic(out,
                      {{"*", Expr::Op::Mul},
                       {"/", Expr::Op::Div},
                       {"//", Expr::Op::FloorDiv},
                       {"%", Expr::Op::Mod}},
                      &Parser::power);
  }

  bool power(ExprPtr &out) {
    return arithmetic(out, {{"**", Expr::Op::Pow}}, &Parser::unaryFiltered);
  }
  bool unaryFiltered(ExprPtr &out) { return unary(out, true); }

  bool unary(ExprPtr &out, bool withFilter) {
    if (++exprDepth_ > kMaxExprDepth)
      return fail(cur().at,
                  "the expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
    bool ok = unaryInner(out, withFilter);
    --exprDepth_;
    return ok;
  }

  bool unaryInner(ExprPtr &out, bool withFilter) {
    if (isOp("-") || isOp("+")) {
      auto e = make(Expr::Kind::Unary, cur().at);
      e->op = isOp("-") ? Expr::Op::Neg : Expr::Op::Pos;
      next();
      ExprPtr operand;
      if (!unary(operand, false))
        return false;
      e->args.push_back(std::move(operand));
      out = std::move(e);
    } else if (!primary(out)) {
      return false;
    }
    if (!postfix(out))
      return false;
    return !withFilter || filterExpr(out);
  }

  bool primary(ExprPtr &out) {
    const Token &tok = cur();
    switch (tok.type) {
    case Tok::Name: {
      out = make(Expr::Kind::Literal, tok.at);
      const std::string &n = tok.text;
      if (n == "true" || n == "True" || n == "false" || n == "False")
        out->value = Value::boolean(n == "true" || n == "True");
      else if (n == "none" || n == "None")
        out->value = Value::none();
      else {
        out->kind = Expr::Kind::Name;
        out->name = n;
      }
      next();
      return true;
    }
    case Tok::String: {
      out = make(Expr::Kind::Literal, tok.at);
      std::string text;
      while (cur().type == Tok::String) {
        text += cur().text;
        next();
      }
      out->value = Value::string(std::move(text));
      return true;
    }
    case Tok::Int:
    case Tok::Float:
      out = make(Expr::Kind::Literal, tok.at);
      out->value = tok.type == Tok::Int ? Value::integer(tok.i) : Value::real(tok.f);
      next();
      return true;
    case Tok::Op:
      if (tok.text == "(") {
        next();
        return tuple(out, true, {}, true) && expectOp(")");
      }
      if (tok.text == "[")
        return list(out);
      if (tok.text == "{")
        return dict(out);
      break;
    default:
      break;
    }
    return unexpected("an expression");
  }

  bool list(ExprPtr &out) {
    out = make(Expr::Kind::ListLit, cur().at);
    next();
    while (!isOp("]")) {
      if (!out->args.empty() && !expectOp(","))
        return false;
      if (isOp("]"))
        break;
      ExprPtr e;
      if (!expression(e, true))
        return false;
      out->args.push_back(std::move(e));
    }
    next();
    return true;
  }

  bool dict(ExprPtr &out) {
    out = make(Expr::Kind::DictLit, cur().at);
    next();
    while (!isOp("}")) {
      if (!out->args.empty() && !expectOp(","))
        return false;
      if (isOp("}"))
        break;
      ExprPtr key, value;
      if (!expression(key, true) || !expectOp(":") || !expression(value, true))
        return false;
      out->args.push_back(std::move(key));
      out->args.push_back(std::move(value));
    }
    next();
    return true;
  }

  bool postfix(ExprPtr &out) {
    while (true) {
      if (isOp(".")) {
        Location at = cur().at;
        next();
        if (cur().type == Tok::Name) {
          auto e = make(Expr::Kind::Attribute, at);
          e->name = cur().text;
          e->args.push_back(std::move(out));
          out = std::move(e);
        } else if (cur().type == Tok::Int) {
          auto e = make(Expr::Kind::Item, at);
          auto index = make(Expr::Kind::Literal, cur().at);
          index->value = Value::integer(cur().i);
          e->args.push_back(std::move(out));
          e->args.push_back(std::move(index));
          out = std::move(e);
        } else {
          return unexpected("a name or a number after '.'");
        }
        next();
      } else if (isOp("[")) {
        if (!subscript(out))
          return false;
      } else if (isOp("(")) {
        if (!call(out))
          return false;
      } else {
        return true;
      }
    }
  }

  bool subscript(ExprPtr &out) {
    Location at = cur().at;
    next();
    ExprPtr parts[3];
    bool slice = false;
    if (!isOp(":") && !expression(parts[0], true))
      return false;
    if (skipOp(":")) {
      slice = true;
      if (!isOp(":") && !isOp("]") && !isOp(",") && !expression(parts[1], true))
        return false;
      if (skipOp(":") && !isOp("]") && !isOp(",") && !expression(parts[2], true))
        return false;
    }
    if (isOp(","))
      return fail(cur().at, "subscripts with several items are outside the supported subset");
    if (!expectOp("]"))
      return false;
    auto e = make(slice ? Expr::Kind::Slice : Expr::Kind::Item, at);
    e->args.push_back(std::move(out));
    for (int i = 0; i < (slice ? 3 : 1); ++i)
      e->args.push_back(std::move(parts[i]));
    out = std::move(e);
    return true;
  }

  // `(args, name=value, ...)` into e->args (after what is already there) and e->keywords.
  bool callArgs(Expr &e) {
    Location at = cur().at;
    next(); // (
    bool needComma = false;
    while (!isOp(")")) {
      if (needComma) {
        if (!expectOp(","))
          return false;
        if (isOp(")"))
          break;
      }
      if (isOp("*") || isOp("**"))
        return fail(cur().at, "'*' and '**' arguments are outside the supported subset");
      if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
        std::string key = cur().text;
        next();
        next();
        ExprPtr value;
        if (!expression(value, true))
          return false;
        e.keywords.emplace_back(std::move(key), std::move(value));
      } else {
        if (!e.keywords.empty())
          return fail(at, "a positional argument follows a keyword argument");
        ExprPtr value;
        if (!expression(value, true))
          return false;
        e.args.push_back(std::move(value));
      }
      needComma = true;
    }
    next();
    return true;
  }

  bool call(ExprPtr &out) {
    auto e = make(Expr::Kind::Call, cur().at);
    e->args.push_back(std::move(out));
    out = std::move(e);
    return callArgs(*out);
  }

  bool dottedName(std::string &name) {
    if (!expectName(name))
      return false;
    while (isOp(".")) {
      next();
      std::string part;
      if (!expectName(part))
        return false;
      name += "." + part;
    }
    return true;
  }

  bool filterExpr(ExprPtr &out) {
    while (true) {
      if (isOp("|")) {
        while (skipOp("|")) {
          Location at = cur().at;
          auto e = make(Expr::Kind::Filter, at);
          if (!dottedName(e->name))
            return false;
          if (!isKnownFilter(e->name))
            return fail(at, "no filter named '" + e->name + "' (outside the supported subset)");
          e->args.push_back(std::move(out));
          if (isOp("(") && !callArgs(*e))
            return false;
          out = std::move(e);
        }
      } else if (isName("is")) {
        Location at = cur().at;
        next();
        auto e = make(Expr::Kind::Test, at);
        e->negated = skipName("not");
        Location nameAt = cur().at;
        if (!dottedName(e->name))
          return false;
        if (!isKnownTest(e->name))
          return fail(nameAt, "no test named '" + e->name + "' (outside the supported subset)");
        e->args.push_back(std::move(out));
        if (isOp("(")) {
          if (!callArgs(*e))
            return false;
        } else if ((cur().type == Tok::Name || cur().type == Tok::String ||
                    cur().type == Tok::Int || cur().type == Tok::Float || isOp("(") || isOp("[") ||
                    isOp("{")) &&
                   !isName("else") && !isName("or") && !isName("and")) {
          if (isName("is"))
            return fail(cur().at, "tests cannot be chained with 'is'");
          ExprPtr arg;
          if (!primary(arg) || !postfix(arg))
            return false;
          e->args.push_back(std::move(arg));
        }
        out = std::move(e);
      } else if (isOp("(")) {
        if (!call(out))
          return false;
      } else {
        return true;
      }
    }
  }
};

} // namespace

bool parseTemplate(std::string_view source, Template &out, std::string &error) {
  out = Template();
  std::vector<Token> tokens;
  if (!lexTemplate(source, tokens, error))
    return false;
  Parser parser(tokens, out);
  if (!parser.run(error)) {
    out = Template();
    return false;
  }
  return true;
}

} // namespace tessel::tok::chat
