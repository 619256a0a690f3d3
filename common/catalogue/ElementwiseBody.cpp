//===- ElementwiseBody.cpp - The text of a fused elementwise body ---------===//
//
// `fused_elementwise` carries its program as text so that a plan stays readable: one step
// per `;`, each a word of the catalogue's `unary` / `binary` enums (or `const`, `unary_grad`,
// `where`) and its operands. The compiler writes it with formatElementwiseBody; the plan
// dialect's verifier and the runtime's decoding read it with parseElementwiseBody, which
// refuses anything it could not run, with the step and the reason.
//
//===----------------------------------------------------------------------===//

#include "common/catalogue/KernelCatalogue.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessel::catalogue {

namespace {

struct EnumWord {
  std::string_view enumName, word;
  int value;
};

const EnumWord kWords[] = {
#define TESSEL_ENUM_VALUE(Enum, Value, Word) {#Enum, Word, static_cast<int>(Enum::Value)},
#include "common/catalogue/KernelCatalogue.def"
};

/// The value of `word` in enum `enumName`, or -1.
int enumValue(std::string_view enumName, std::string_view word) {
  for (const EnumWord &w : kWords)
    if (w.enumName == enumName && w.word == word)
      return w.value;
  return -1;
}

std::vector<std::string_view> splitWords(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ')
      ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ' ')
      ++i;
    if (i > start)
      out.push_back(s.substr(start, i - start));
  }
  return out;
}

bool parseNumber(std::string_view w, double &out) {
  std::string s(w);
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

std::string formatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string regName(const BodyReg &r) { return (r.input ? "x" : "t") + std::to_string(r.index); }

class Parser {
public:
  Parser(ElementwiseBody &body, std::string &error) : body_(body), error_(error) {}

  bool step(std::string_view text) {
    std::vector<std::string_view> w = splitWords(text);
    if (w.empty())
      return fail("is empty");
    BodyStep s;
    std::string_view op = w[0];
    size_t arity = 0;
    bool exponent = false;
    if (op == "const") {
      s.kind = BodyStep::Kind::Const;
      if (w.size() != 2 || !parseNumber(w[1], s.value))
        return fail("'const' takes one number");
      return add(s);
    }
    size_t first = 1;
    if (op == "where") {
      s.kind = BodyStep::Kind::Where;
      arity = 3;
    } else if (op == "unary_grad") {
      s.kind = BodyStep::Kind::UnaryGrad;
      if (w.size() < 2)
        return fail("'unary_grad' needs a function");
      int fn = enumValue("UnaryOp", w[1]);
      if (fn < 0)
        return fail("has an unknown function '" + std::string(w[1]) + "'");
      s.unary = static_cast<UnaryOp>(fn);
      arity = 3;
      first = 2;
      exponent = s.unary == UnaryOp::Pow;
    } else if (int u = enumValue("UnaryOp", op); u >= 0) {
      s.kind = BodyStep::Kind::Unary;
      s.unary = static_cast<UnaryOp>(u);
      arity = 1;
      exponent = s.unary == UnaryOp::Pow;
    } else if (int b = enumValue("BinaryOp", op); b >= 0) {
      s.kind = BodyStep::Kind::Binary;
      s.binary = static_cast<BinaryOp>(b);
      arity = 2;
    } else {
      return fail("has an unknown operation '" + std::string(op) + "'");
    }
    if (w.size() != first + arity + (exponent ? 1 : 0))
      return fail("'" + std::string(op) + "' takes " + std::to_string(arity) + " operand" +
                  (arity == 1 ? "" : "s") + (exponent ? " and an exponent" : ""));
    for (size_t k = 0; k < arity; ++k)
      if (!reg(w[first + k], s.args[k]))
        return false;
    if (exponent && !parseNumber(w[first + arity], s.value))
      return fail("has an exponent that is not a number");
    return add(s);
  }

private:
  bool reg(std::string_view w, BodyReg &r) {
    if (w.size() < 2 || (w[0] != 'x' && w[0] != 't') || w.size() > 6)
      return fail("has operand '" + std::string(w) + "'; operands are xK (input K) or tK (step K)");
    int64_t index = 0;
    for (char ch : w.substr(1)) {
      if (ch < '0' || ch > '9')
        return fail("has operand '" + std::string(w) + "'; operands are xK or tK");
      index = index * 10 + (ch - '0');
    }
    r.input = w[0] == 'x';
    r.index = static_cast<int32_t>(index);
    if (!r.input && index >= static_cast<int64_t>(body_.steps.size()))
      return fail("reads " + std::string(w) + ", which is not an earlier step");
    if (r.input)
      body_.inputs = std::max(body_.inputs, r.index + 1);
    return true;
  }
  bool add(const BodyStep &s) {
    if (body_.steps.size() >= kMaxBodySteps)
      return fail("is one too many: a body has at most " + std::to_string(kMaxBodySteps) +
                  " steps");
    body_.steps.push_back(s);
    return true;
  }
  bool fail(const std::string &why) {
    error_ = "step " + std::to_string(body_.steps.size()) + " " + why;
    return false;
  }

  ElementwiseBody &body_;
  std::string &error_;
};

} // namespace

bool parseElementwiseBody(std::string_view text, ElementwiseBody &body, std::string &error) {
  body = ElementwiseBody();
  Parser parser(body, error);
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(';', at);
    if (end == std::string_view::npos)
      end = text.size();
    if (!parser.step(text.substr(at, end - at)))
      return false;
    at = end + 1;
  }
  return true;
}

std::string formatElementwiseBody(const ElementwiseBody &body) {
  std::string out;
  for (const BodyStep &s : body.steps) {
    if (!out.empty())
      out += "; ";
    switch (s.kind) {
    case BodyStep::Kind::Const:
      out += "const " + formatNumber(s.value);
      continue;
    case BodyStep::Kind::Unary:
      out += std::string(wordOf(s.unary)) + " " + regName(s.args[0]);
      break;
    case BodyStep::Kind::UnaryGrad:
      out += "unary_grad " + std::string(wordOf(s.unary)) + " " + regName(s.args[0]) + " " +
             regName(s.args[1]) + " " + regName(s.args[2]);
      break;
    case BodyStep::Kind::Binary:
      out += std::string(wordOf(s.binary)) + " " + regName(s.args[0]) + " " + regName(s.args[1]);
      continue;
    case BodyStep::Kind::Where:
      out += "where " + regName(s.args[0]) + " " + regName(s.args[1]) + " " + regName(s.args[2]);
      continue;
    }
    if (s.unary == UnaryOp::Pow)
      out += " " + formatNumber(s.value);
  }
  return out;
}

} // namespace tessel::catalogue
