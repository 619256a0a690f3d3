//===- ChatTemplateParser.cpp - Chat templates' text to their tree --------===//
//
// Jinja's parser for the subset chat templates use: statements (if, for, set, macro,
// generation, break, continue) here, expressions with jinja2/parser.py's grammar and
// precedences in ChatTemplateExpressions.cpp, so a template parses here as it does there. What
// the subset leaves out is refused by name, as are unknown filters and tests (Jinja checks
// those when it compiles).
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateParser.h"

namespace tessel::tok::chat {

// Statements until a block tag named in `ends`; `end` gets the name found (its tag is
// consumed up to the name).
bool Parser::body(Body &into, std::initializer_list<const char *> ends, std::string &end,
                  Location opener, const char *what) {
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

bool Parser::statement(Body &into) {
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
    static const char *const kLeftOut[] = {"call", "filter",  "with",      "include", "import",
                                           "from", "extends", "block",     "raw",     "autoescape",
                                           "do",   "trans",   "pluralize", "endraw"};
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

bool Parser::parseIf(Node &n) {
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

bool Parser::assignTarget(Target &target, bool withNamespace, const char *endName) {
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
    if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
        name == "None")
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

bool Parser::parseFor(Node &n) {
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

bool Parser::parseSet(Node &n) {
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

bool Parser::parseMacro(Node &n) {
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

bool Parser::parseGeneration(Node &n) {
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