//===- AstBuilder.cpp - From ANTLR's parse tree to the AST ----------------===//
//
// The parse tree is ANTLR's, one context class per grammar rule; the rest of the front end
// works on the AST of AST.h. The conversion tolerates what error recovery leaves behind (a
// rule without its name or its body is skipped: its syntax error has been reported), and
// bounds the nesting of expressions, which chains such as `a + a + ... + a` build without
// brackets, so that nothing downstream recurses without limit.
//
//===----------------------------------------------------------------------===//

#include "ParserImpl.h"

#include <optional>

using namespace tessel;
using tessel::detail::LocMapper;
using tessel::grammar::TesselParser;

namespace {

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
          file->imports.push_back(
              {unquote(imp->STRING()->getText()), locs_.of(imp->STRING()->getSymbol())});
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
        diags_.error(locs_.of(ctx->getStart()),
                     "expression has more than " + std::to_string(maxDepth_) + " nested operations",
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

} // namespace

std::unique_ptr<ast::File> tessel::detail::buildAst(TesselParser::FileContext *ctx, int fileId,
                                                    const LocMapper &locs, DiagnosticEngine &diags,
                                                    unsigned maxDepth) {
  return AstBuilder(locs, diags, maxDepth).build(ctx, fileId);
}
