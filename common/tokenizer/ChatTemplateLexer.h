//===- ChatTemplateLexer.h - The tokens of a chat template -------*- C++ -*-===//
//
// Jinja's lexer as transformers configures it: the template's data between tags, with
// whitespace control applied, and the tokens inside `{% %}` and `{{ }}` tags. Comments leave
// nothing. The parser (ChatTemplateParser.cpp) reads the tokens.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATELEXER_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATELEXER_H

#include "common/tokenizer/ChatTemplateSyntax.h"

#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok::chat {

enum class Tok : uint8_t {
  Data,
  BlockBegin,
  BlockEnd,
  VarBegin,
  VarEnd,
  Name,
  String,
  Int,
  Float,
  Op,
  End
};

struct Token {
  Tok type;
  Location at;
  std::string text; // data, name, string value (escapes read), operator
  int64_t i = 0;
  double f = 0;
};

/// The tokens of a template's text, ending with an End token; false with "line L, column C:
/// what" for text that is not valid UTF-8, an unclosed tag, comment or string, a bad escape or
/// number, or a character no token starts with.
bool lexTemplate(std::string_view source, std::vector<Token> &tokens, std::string &error);

/// How a token reads in a message: "'for'", "string", "end of statement block".
std::string describeToken(const Token &t);

} // namespace tessel::tok::chat

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATELEXER_H
