//===- ASTPrinter.cpp - `--emit=ast` ---------------------------------------===//

#include "tessel/Frontend/Sema.h"

#include <ostream>

using namespace tessel;

namespace {

class Printer {
public:
  Printer(const SourceManager &sources, std::ostream &os) : sources_(sources), os_(os) {}

  void file(const ast::File &f) {
    line(0) << "File " << sources_.file(f.fileId).path() << "\n";
    for (const ast::Import &i : f.imports)
      line(1) << "Import \"" << i.path << "\" " << at(i.loc) << "\n";
    for (const ast::Block &b : f.blocks)
      block(b, 1);
    for (const ast::Model &m : f.models)
      model(m);
    for (const ast::Section &s : f.sections) {
      line(1) << "Section " << s.kind.name << " " << at(s.kind.loc) << "\n";
      for (const ast::Setting &st : s.settings)
        setting(st, 2);
    }
  }

private:
  std::ostream &line(int depth) { return os_ << std::string(2 * depth, ' '); }

  std::string at(SourceLoc loc) const {
    return loc.isValid() ? "@" + std::to_string(loc.line) + ":" + std::to_string(loc.col) : "@?";
  }

  std::string type(const ast::TypeExpr &t) const {
    std::string out = t.dtype.name + "[";
    for (size_t i = 0; i < t.dims.size(); ++i)
      out += (i ? ", " : "") + t.dims[i].name;
    return out + "]";
  }

  std::string expr(const ast::Expr &e) const {
    switch (e.kind) {
    case ast::ExprKind::Number:
    case ast::ExprKind::Name:
      return e.text;
    case ast::ExprKind::String:
      return "\"" + e.text + "\"";
    case ast::ExprKind::Neg:
      return "(-" + expr(*e.operands[0]) + ")";
    case ast::ExprKind::Binary:
      return "(" + expr(*e.operands[0]) + " " + e.text + " " + expr(*e.operands[1]) + ")";
    case ast::ExprKind::Call:
    case ast::ExprKind::Tuple:
    case ast::ExprKind::List: {
      std::string out = e.kind == ast::ExprKind::Call ? e.text + "(" : e.kind == ast::ExprKind::Tuple ? "(" : "[";
      for (size_t i = 0; i < e.operands.size(); ++i) {
        out += i ? ", " : "";
        if (e.kind == ast::ExprKind::Call && !e.keys[i].empty())
          out += e.keys[i] + " = ";
        out += expr(*e.operands[i]);
      }
      return out + (e.kind == ast::ExprKind::List ? "]" : ")");
    }
    }
    return "?";
  }

  void block(const ast::Block &b, int depth) {
    line(depth) << "Block " << b.name.name << " " << at(b.name.loc) << "\n";
    for (const ast::TypedName &a : b.args)
      line(depth + 1) << "Arg " << a.name.name << ": " << type(a.type) << "\n";
    line(depth + 1) << "Result " << type(b.result) << "\n";
    body(b.body, depth + 1);
  }

  void body(const std::vector<ast::StmtPtr> &stmts, int depth) {
    for (const ast::StmtPtr &s : stmts) {
      switch (s->kind) {
      case ast::StmtKind::Param:
        line(depth) << "Param " << s->name.name << ": " << type(s->type);
        if (s->value)
          os_ << " init " << expr(*s->value);
        os_ << " " << at(s->loc) << "\n";
        break;
      case ast::StmtKind::Assign:
        line(depth) << "Assign " << s->name.name << " = " << expr(*s->value) << " " << at(s->loc)
                    << "\n";
        break;
      case ast::StmtKind::Return:
        line(depth) << "Return " << expr(*s->value) << " " << at(s->loc) << "\n";
        break;
      case ast::StmtKind::Expr:
        line(depth) << "Expr " << expr(*s->value) << " " << at(s->loc) << "\n";
        break;
      case ast::StmtKind::Repeat:
        line(depth) << "Repeat " << expr(*s->value) << " " << at(s->loc) << "\n";
        body(s->body, depth + 1);
        break;
      }
    }
  }

  void model(const ast::Model &m) {
    line(1) << "Model " << m.name.name << " " << at(m.name.loc) << "\n";
    for (const ast::Definition &d : m.dims)
      line(2) << "Dim " << d.name.name << " = " << expr(*d.value) << "\n";
    for (const ast::Definition &d : m.constants)
      line(2) << "Const " << d.name.name << " = " << expr(*d.value) << "\n";
    for (const ast::Block &b : m.blocks)
      block(b, 2);
    if (m.forward) {
      line(2) << "Forward -> " << m.forward->result.name << " " << at(m.forward->loc) << "\n";
      for (const ast::TypedName &a : m.forward->args)
        line(3) << "Arg " << a.name.name << ": " << type(a.type) << "\n";
      body(m.forward->body, 3);
    }
  }

  void setting(const ast::Setting &s, int depth) {
    if (s.isGroup()) {
      line(depth) << "Group " << s.key.name << "\n";
      for (const ast::Setting &inner : s.group)
        setting(inner, depth + 1);
      return;
    }
    line(depth) << "Set " << s.key.name << " = " << expr(*s.value) << "\n";
  }

  const SourceManager &sources_;
  std::ostream &os_;
};

} // namespace

void tessel::printAst(const ast::File &file, const SourceManager &sources, std::ostream &os) {
  Printer(sources, os).file(file);
}
