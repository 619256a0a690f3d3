//===- AST.h - Syntax tree of a .model file ---------------------*- C++ -*-===//
//
// The parser turns each file into these structures; semantic analysis reads them and never
// sees ANTLR types. Expressions are one small tree type shared by dim arithmetic, tensor
// computations and setting values: what an expression means depends on where it appears.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_AST_H
#define TESSEL_FRONTEND_AST_H

#include "tessel/Frontend/Source.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessel::ast {

enum class ExprKind {
  Number, ///< `text` holds the literal as written (`6e-4`, `25MB`, `1f1b`).
  String, ///< `text` holds the unescaped contents.
  Name,   ///< `text` holds the identifier.
  Call,   ///< `text` is the callee; `operands` the arguments; `keys` their keywords.
  Neg,    ///< `operands[0]` negated.
  Binary, ///< `text` is the operator (+ - * / // % @); `operands` the two sides.
  Tuple,  ///< `(a, b)`.
  List,   ///< `[a, b]`.
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  std::string text;
  std::vector<std::unique_ptr<Expr>> operands;
  /// For calls: the keyword of each argument, "" for positional ones.
  std::vector<std::string> keys;
  /// For calls: where each keyword is written (invalid for positional arguments), so that an
  /// error about a keyword points at it rather than at its value.
  std::vector<SourceLoc> keyLocs;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Ident {
  std::string name;
  SourceLoc loc;
};

/// `i32[batch, seq]`; `dtype` is empty for the default (f32).
struct TypeExpr {
  Ident dtype;
  std::vector<Ident> dims;
  SourceLoc loc;
};

struct TypedName {
  Ident name;
  TypeExpr type;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

enum class StmtKind { Param, Assign, Return, Repeat, Expr };

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  Ident name;          ///< Param, Assign: the name bound.
  TypeExpr type;       ///< Param: its shape.
  ExprPtr value;       ///< Param: its init (may be null); Assign, Return, Expr: the value; Repeat:
                             ///< count.
  std::vector<StmtPtr> body; ///< Repeat.
};

/// A block: a named, parameterised sub-network that may be instantiated many times.
struct Block {
  Ident name;
  std::vector<TypedName> args;
  TypeExpr result;
  std::vector<StmtPtr> body;
};

struct Forward {
  SourceLoc loc;
  std::vector<TypedName> args;
  Ident result;
  std::vector<StmtPtr> body;
};

struct Definition {
  Ident name;
  ExprPtr value;
};

struct Model {
  Ident name;
  std::vector<Definition> dims;
  std::vector<Definition> constants;
  std::vector<Block> blocks;
  std::optional<Forward> forward;
  std::vector<SourceLoc> forwardDuplicates;
};

/// `key = value` or `key { settings }` inside `parallel` / `train`.
struct Setting {
  Ident key;
  ExprPtr value;                 ///< Null for a group.
  std::vector<Setting> group;
  bool isGroup() const { return !value; }
};

struct Section {
  Ident kind; ///< "parallel" or "train".
  std::vector<Setting> settings;
};

struct Import {
  std::string path;
  SourceLoc loc;
};

/// Everything one file declares.
struct File {
  int fileId = -1;
  std::vector<Import> imports;
  std::vector<Block> blocks;
  std::vector<Model> models;
  std::vector<Section> sections;
};

} // namespace tessel::ast

#endif // TESSEL_FRONTEND_AST_H
