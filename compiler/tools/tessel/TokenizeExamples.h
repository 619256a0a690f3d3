//===- TokenizeExamples.h - Fine-tuning examples from JSON lines -*- C++ -*-===//
//
// What `tessel tokenize` makes of a JSON line that is an example rather than a document: the
// ids of one training row and which of them are trained (the loss mask), as Tessel's example
// files hold them (common/data/TokenFiles.h).
//
// - {"prompt": P, "completion": C} with strings: the prompt encoded with the tokenizer's
//   special tokens (Llama 3's <|begin_of_text|> before it), the completion after it, then the
//   end-of-sequence token; the completion and the end-of-sequence token are trained.
// - {"messages": [{"role", "content"}, ...]}: the conversation rendered with a chat template
//   (the model's own or a built-in, common/tokenizer/ChatTemplate.h); the assistant turns are
//   trained. Where the template marks them ({% generation %} ... {% endgeneration %}) the marks
//   say what is trained; otherwise each assistant turn is what rendering the conversation up to
//   and including it adds to rendering it up to that turn's generation prompt (the template's
//   own end-of-turn tokens included), and a template whose earlier turns render differently as
//   the conversation grows is refused for that line, saying why.
// - {"prompt": [messages], "completion": [messages]}: a conversation whose completion's
//   messages are trained.
// Each part is encoded on its own without the tokenizer's special tokens (the template writes
// them as text, and the tokenizer reads special tokens in text), so the mask follows the parts
// exactly. With `trainOnAll`, every token but the first is trained.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_TOKENIZEEXAMPLES_H
#define TESSEL_TOOLS_TOKENIZEEXAMPLES_H

#include "common/tokenizer/JsonReader.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

namespace tok {
class ChatTemplate;
class Tokenizer;
} // namespace tok

/// What a JSON line holds.
enum class LineKind { Document, Completion, Chat };

/// The kind of JSON line object `line`: `messages` makes it a chat; `prompt` and `completion`
/// a prompt and completion (a chat when they hold lists of messages); anything else a document.
LineKind lineKind(const tok::JsonValue &line);

struct ExampleRecipe {
  const tok::Tokenizer *tokenizer = nullptr;
  /// The chat template for conversations; null where there is none (a chat line is refused).
  const tok::ChatTemplate *chat = nullptr;
  /// Why there is no template, for the refusal.
  std::string noChatReason;
  /// The template's bos_token and eos_token variables.
  std::string bosToken, eosToken;
  /// A plain prompt's special tokens, and the token after a plain completion.
  bool addSpecialTokens = true;
  std::optional<uint32_t> eos;
  bool trainOnAll = false;
};

/// The example of line `line`, of kind `kind` (Completion or Chat, as lineKind says): its ids
/// and, for each, 1 where it is trained. False with the reason (not naming the line) where the
/// line is malformed, the template fails, or nothing would be trained.
bool buildExample(const tok::JsonValue &line, LineKind kind, const ExampleRecipe &recipe,
                  std::vector<uint32_t> &ids, std::vector<uint8_t> &trained, std::string &error);

} // namespace tessel

#endif // TESSEL_TOOLS_TOKENIZEEXAMPLES_H
