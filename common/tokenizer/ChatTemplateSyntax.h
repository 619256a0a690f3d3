//===- ChatTemplateSyntax.h - The parsed form of a chat template -*- C++ -*-===//
//
// What ChatTemplateParser.cpp makes of a template's text and ChatTemplateRender.cpp runs: a
// tree of statements (text, output, if, for, set, macro, generation) over a tree of
// expressions, each node with the line and column of the text it came from. Whitespace control
// (`-`, `+`, trim_blocks, lstrip_blocks) is applied by the lexer, so the text nodes hold
// exactly what is printed.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATESYNTAX_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATESYNTAX_H

#include "common/tokenizer/ChatTemplateValue.h"

#include <memory>
#include <string>
#include <vector>

namespace tessel::tok::chat {

struct Location {
  uint32_t line = 1, column = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// Keyword arguments of a call, filter or test, in the order written.
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind : uint8_t {
    Literal,   // value
    Name,      // name
    ListLit,   // args: the elements
    TupleLit,  // args: the elements
    DictLit,   // args: key, value, key, value, ...
    Attribute, // args[0].name
    Item,      // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]], absent parts null
    Call,      // args[0](args[1..], keywords)
    Filter,    // args[0] | name(args[1..], keywords)
    Test,      // args[0] is [not] name(args[1..], keywords); negated
    Unary,     // op args[0]: Neg, Pos, Not
    Binary,    // args[0] op args[1]: arithmetic, And, Or
    Concat,    // args joined as strings (~)
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...
    Condition, // args[0] if args[1] else args[2] (absent: undefined)
  };
  enum class Op : uint8_t {
    None,
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    And,
    Or,
    Neg,
    Pos,
    Not,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn
  };

  Kind kind;
  Op op = Op::None;
  bool negated = false;
  Location at;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<Op> ops;
  KeywordArgs keywords;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

/// What a for loop or a set binds: one name, several (unpacked), or a namespace's attribute.
struct Target {
  std::vector<std::string> names;
  bool tuple = false;
  /// `set ns.attr = ...`: names[0] is the namespace, attribute the attribute.
  std::string attribute;
};

struct MacroParam {
  std::string name;
  ExprPtr defaultValue;
};

struct Node {
  enum class Kind : uint8_t {
    Text,       // text
    Output,     // {{ expr }}
    If,         // conditions[i] -> bodies[i]; a final body without condition is the else
    For,        // for target in expr [if filter]: bodies[0] [else bodies[1]]
    Set,        // set target = expr
    SetBlock,   // set target: bodies[0] captured
    Macro,      // macro name(params): bodies[0]
    Generation, // generation: bodies[0], its output range recorded
    Break,
    Continue,
  };

  Kind kind;
  Location at;
  std::string text;
  ExprPtr expr, filter;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Target target;
  std::vector<MacroParam> params;
};

/// A parsed template.
struct Template {
  Body body;
  bool hasGeneration = false;
};

/// Parses Jinja source into `out`; false with "line L, column C: what" on a syntax error or a
/// construct outside the supported subset.
bool parseTemplate(std::string_view source, Template &out, std::string &error);

/// The filters and tests the renderer implements, which the parser checks names against (as
/// Jinja does when it compiles a template).
bool isKnownFilter(std::string_view name);
bool isKnownTest(std::string_view name);

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATESYNTAX_H
