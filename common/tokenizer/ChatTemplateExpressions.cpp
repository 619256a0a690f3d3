//===- ChatTemplateExpressions.cpp - Chat templates' expressions ----------===//
//
// The expressions of Jinja's grammar as jinja2/parser.py reads them, with its precedences:
// conditional expressions, or, and, not, comparisons, + and -, ~, *, /, // and %, **, unary
// signs, then filters and tests, and the primaries with their attributes, subscripts, slices
// and calls. Filters and tests are checked against those the renderer implements.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateParser.h"

namespace tessel::tok::chat {

bool Parser::isTupleEnd(std::initializer_list<const char *> extraEnds) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || isOp(")"))
    return true;
  for (const char *e : extraEnds)
    if (isName(e))
      return true;
  return false;
}

bool Parser::tuple(ExprPtr &out, bool withCondition, std::initializer_list<const char *> extraEnds,
                   bool explicitParens) {
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

bool Parser::expression(ExprPtr &out, bool withCondition) {
  if (++exprDepth_ > kMaxExprDepth)
    return fail(cur().at,
                "the expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
  bool ok = withCondition ? condition(out) : orExpr(out);
  --exprDepth_;
  return ok;
}

bool Parser::condition(ExprPtr &out) {
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
bool Parser::binaryNode(ExprPtr &out, Expr::Op op, bool (Parser::*operand)(ExprPtr &)) {
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

bool Parser::binaryChain(ExprPtr &out, Expr::Op op, const char *name,
                         bool (Parser::*operand)(ExprPtr &)) {
  if (!(this->*operand)(out))
    return false;
  while (isName(name))
    if (!binaryNode(out, op, operand))
      return false;
  return true;
}

bool Parser::orExpr(ExprPtr &out) { return binaryChain(out, Expr::Op::Or, "or", &Parser::andExpr); }
bool Parser::andExpr(ExprPtr &out) {
  return binaryChain(out, Expr::Op::And, "and", &Parser::notExpr);
}

bool Parser::notExpr(ExprPtr &out) {
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

bool Parser::compare(ExprPtr &out) {
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

bool Parser::arithmetic(ExprPtr &out, std::initializer_list<std::pair<const char *, Expr::Op>> ops,
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

bool Parser::math1(ExprPtr &out) {
  return arithmetic(out, {{"+", Expr::Op::Add}, {"-", Expr::Op::Sub}}, &Parser::concat);
}

bool Parser::concat(ExprPtr &out) {
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

bool Parser::math2(ExprPtr &out) {
  return arithmetic(out,
                    {{"*", Expr::Op::Mul},
                     {"/", Expr::Op::Div},
                     {"//", Expr::Op::FloorDiv},
                     {"%", Expr::Op::Mod}},
                    &Parser::power);
}

bool Parser::power(ExprPtr &out) {
  return arithmetic(out, {{"**", Expr::Op::Pow}}, &Parser::unaryFiltered);
}
bool Parser::unaryFiltered(ExprPtr &out) { return unary(out, true); }

bool Parser::unary(ExprPtr &out, bool withFilter) {
  if (++exprDepth_ > kMaxExprDepth)
    return fail(cur().at,
                "the expression nests deeper than " + std::to_string(kMaxExprDepth) + " levels");
  bool ok = unaryInner(out, withFilter);
  --exprDepth_;
  return ok;
}

bool Parser::unaryInner(ExprPtr &out, bool withFilter) {
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

bool Parser::primary(ExprPtr &out) {
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

bool Parser::list(ExprPtr &out) {
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

bool Parser::dict(ExprPtr &out) {
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

bool Parser::postfix(ExprPtr &out) {
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

bool Parser::subscript(ExprPtr &out) {
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
bool Parser::callArgs(Expr &e) {
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

bool Parser::call(ExprPtr &out) {
  auto e = make(Expr::Kind::Call, cur().at);
  e->args.push_back(std::move(out));
  out = std::move(e);
  return callArgs(*out);
}

bool Parser::dottedName(std::string &name) {
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

bool Parser::filterExpr(ExprPtr &out) {
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
      } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                  cur().type == Tok::Float || isOp("(") || isOp("[") || isOp("{")) &&
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

} // namespace tessel::tok::chat
