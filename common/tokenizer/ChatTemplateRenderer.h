//===- ChatTemplateRenderer.h - The renderer of chat templates --*- C++ -*-===//
//
// The tree walker that runs a parsed template, shared by the files that define it: its
// scopes (one per for-loop iteration, macro call and block, each reading its parent's), its
// bounds on nesting, and the Renderer, whose statements run in ChatTemplateRender.cpp, whose
// expressions are evaluated in ChatTemplateEvaluate.cpp and whose arithmetic and comparisons,
// Python's, are in ChatTemplateOperators.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATERENDERER_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATERENDERER_H

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/ChatTemplateBuiltins.h"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessel::tok::chat {

// Nesting of evaluation (macro calls, blocks, expressions): far beyond real templates, and at
// this depth the stack used stays below half a megabyte.
constexpr unsigned kMaxDepth = 500;
// Nesting of values: deeper than the JSON reader's 512 levels, and comparing, printing and
// freeing values recurse this deep at a small cost per level.
constexpr unsigned kMaxValueDepth = 1000;

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value *find(const std::string &name) const {
    for (const auto &[n, v] : vars)
      if (n == name)
        return &v;
    return nullptr;
  }
  void set(const std::string &name, Value v) {
    for (auto &[n, old] : vars)
      if (n == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using ScopePtr = std::shared_ptr<Scope>;

inline ScopePtr child(const ScopePtr &parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

class Renderer {
public:
  Renderer(RenderState &st, const Dict &globals, std::string &root, std::vector<TextRange> *ranges)
      : st_(st), globals_(globals), out_(&root), root_(root), ranges_(ranges) {}

  bool run(const Template &t) {
    top_ = std::make_shared<Scope>();
    return exec(t.body, top_) != Flow::Fail;
  }

private:
  enum class Flow { Next, Break, Continue, Fail };

  RenderState &st_;
  const Dict &globals_;
  std::string *out_;
  std::string &root_;
  std::vector<TextRange> *ranges_;
  ScopePtr top_;
  unsigned depth_ = 0, calls_ = 0;

  bool fail(Location at, const std::string &what) {
    st_.at = at;
    return st_.fail(what);
  }

  /// One level of nesting, counted while it lives.
  struct Nest {
    Renderer &r;
    bool ok;
    Nest(Renderer &r, Location at) : r(r), ok(++r.depth_ <= kMaxDepth) {
      if (!ok)
        r.fail(at, "the template nests deeper than " + std::to_string(kMaxDepth) +
                       " levels (macro calls, blocks and expressions)");
    }
    ~Nest() { --r.depth_; }
  };

  // ---- Statements (ChatTemplateRender.cpp) ----

  bool emit(std::string_view text);
  Flow capture(const Body &body, const ScopePtr &scope, std::string &text);
  Flow exec(const Body &body, const ScopePtr &scope);
  Flow node(const Node &n, const ScopePtr &scope);
  bool unpack(const Target &target, const Value &v, Scope &scope, Location at);
  bool assign(const Node &n, const Value &v, const ScopePtr &scope);
  Flow forLoop(const Node &n, const ScopePtr &scope);

  // ---- Expressions (ChatTemplateEvaluate.cpp) ----

  bool lookup(const std::string &name, const ScopePtr &scope, Value &out);
  bool evalArgs(const Expr &e, size_t first, const ScopePtr &scope, Args &args);
  bool call(const Value &fn, const Args &args, Location at, Value &out);
  bool callMacro(const Callable &fn, const Args &args, Location at, Value &out);
  bool eval(const Expr &e, const ScopePtr &scope, Value &out);
  bool evalInner(const Expr &e, const ScopePtr &scope, Value &out);

  // ---- Operators (ChatTemplateOperators.cpp) ----

  bool undefinedOperand(const Expr &e, const Value &a, const Value &b);
  bool negate(const Expr &e, const Value &v, Value &out);
  bool overflow(const Expr &e);
  static int64_t asInt(const Value &v);
  bool repeat(const Expr &e, const Value &seq, int64_t n, Value &out);
  bool arithmetic(const Expr &e, const Value &a, const Value &b, Value &out);
  bool compare(const Expr &e, Expr::Op op, const Value &a, const Value &b, bool &out);
};

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATERENDERER_H
