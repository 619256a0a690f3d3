//===- Expansion.cpp - Bounding elaboration before it starts --------------===//
//
// Elaboration runs every repeat body once per iteration and every block body once per call,
// so nested repeats of 96 would create ops until the op limit, seconds and a gigabyte later,
// before refusing the model. Sema::expansion counts the statements elaboration would run,
// saturating past the limit, so that such a model is refused at its repeat before any work.
//
//===----------------------------------------------------------------------===//

#include "SemaImpl.h"

#include <algorithm>

using namespace tessel;
using namespace tessel::detail;

namespace {

/// a + b and a x b, held at `cap` (the count only matters up to the limit).
uint64_t addCapped(uint64_t a, uint64_t b, uint64_t cap) { return std::min(cap, a + b); }
uint64_t mulCapped(uint64_t a, uint64_t b, uint64_t cap) {
  return b != 0 && a > cap / b ? cap : std::min(cap, a * b);
}

} // namespace

uint64_t Sema::expansion(const ast::Expr &expr) {
  uint64_t cap = options_.maxOps + 1;
  uint64_t n = 0;
  if (expr.kind == ast::ExprKind::Call) {
    auto block = blocks_.find(expr.text);
    // Self-calls and blocks nested past elaboration's limit of 64 are errors it reports; a
    // chain of a hundred thousand blocks must not exhaust the stack here first.
    if (block != blocks_.end() && !expanding_.count(block->second) && expanding_.size() < 64) {
      auto memo = blockExpansion_.find(block->second);
      if (memo == blockExpansion_.end()) {
        expanding_.insert(block->second);
        uint64_t body = expansion(block->second->body);
        expanding_.erase(block->second);
        memo = blockExpansion_.insert({block->second, body}).first;
      }
      n = memo->second;
    }
  }
  for (const ast::ExprPtr &operand : expr.operands)
    n = addCapped(n, expansion(*operand), cap);
  return n;
}

uint64_t Sema::expansion(const std::vector<ast::StmtPtr> &body) {
  uint64_t cap = options_.maxOps + 1;
  uint64_t total = 0;
  for (const ast::StmtPtr &stmt : body) {
    uint64_t n = 1;
    if (stmt->kind != ast::StmtKind::Repeat) {
      if (stmt->value)
        n = addCapped(n, expansion(*stmt->value), cap);
      total = addCapped(total, n, cap);
      continue;
    }
    // A count elaboration would refuse is reported there, in source order.
    quiet_ = true;
    Value count = evalConstant(*stmt->value);
    quiet_ = false;
    uint64_t inner = expansion(stmt->body);
    if (count.kind != Value::Int || count.i < 1 || count.i > options_.maxRepeat) {
      total = addCapped(total, inner, cap);
      continue;
    }
    n = mulCapped(static_cast<uint64_t>(count.i), inner, cap);
    if (n >= cap && inner < cap && !elaborationAborted_) {
      // No overflow: the count is at most maxRepeat and the body below the op limit.
      std::string all = std::to_string(static_cast<uint64_t>(count.i) * inner);
      error(stmt->value->loc,
            "this repeat runs its body " + std::to_string(count.i) +
                " times and the body expands to " + std::to_string(inner) + " statement" +
                (inner == 1 ? "" : "s") + ": " + all + " in all, more than the limit of " +
                std::to_string(options_.maxOps),
            "nested repeats and repeated block calls multiply; is a count far larger than "
            "intended?");
      elaborationAborted_ = true;
    }
    total = addCapped(total, n, cap);
  }
  return total;
}
