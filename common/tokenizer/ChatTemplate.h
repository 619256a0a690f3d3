//===- ChatTemplate.h - Chat templates: conversations to text ---*- C++ -*-===//
//
// A model's chat template turns a conversation (a list of messages with a role and content)
// into the text the model was trained on: `<|im_start|>user\nHi<|im_end|>\n...`. Hugging Face
// ships it as Jinja source in tokenizer_config.json (Tokenizer::chatTemplate()) and renders it
// with Python's Jinja2 in an immutable sandbox with trim_blocks and lstrip_blocks on. Tessel
// renders the subset of Jinja those templates use (Llama 2, 3 and 3.1, Mistral, Qwen2, 2.5 and
// 3, Gemma, ChatML and their kin) and gives transformers' text byte for byte: Python's values
// and printing, Jinja's whitespace control and undefined values, transformers' tojson,
// raise_exception and strftime_now. A construct outside the subset is a parse error that names
// it and its line and column, never a wrong text. docs/tokenizers.md lists the subset.
//
// transformers' `{% generation %}` ... `{% endgeneration %}` blocks mark the text a model
// should learn to produce (the assistant's replies); a render reports their byte ranges, from
// which a trainer makes its loss mask.
//
// A parsed template is immutable: several threads may render it at once.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATE_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATE_H

#include "common/tokenizer/ChatTemplateValue.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::tok {

class JsonValue;
namespace chat {
struct Template;
} // namespace chat

/// Bytes [begin, end) of a rendered text.
struct TextRange {
  size_t begin = 0, end = 0;
  bool operator==(const TextRange &o) const { return begin == o.begin && end == o.end; }
};

class ChatTemplate {
public:
  /// Bounds on one render, so that a hostile template can neither hang nor exhaust memory. A
  /// render that reaches one fails saying which.
  struct Limits {
    /// The rendered text, and any string the template builds.
    size_t maxOutputBytes = 64u << 20;
    /// Work: each loop iteration and element of a list the template builds or compares, each
    /// 64 bytes of text it builds, prints, searches or compares, is one step; a macro call is
    /// five. Ten million steps take a second or two.
    uint64_t maxSteps = 10'000'000;
    /// Macro calls inside macro calls.
    unsigned maxCallDepth = 64;
  };

  struct Options {
    /// The variables transformers passes: add_generation_prompt, and bos_token and eos_token
    /// (left undefined when empty, as for a tokenizer that has none).
    bool addGenerationPrompt = false;
    std::string bosToken, eosToken;
    /// More top-level variables, as the text of a JSON object: `{"tools": [...],
    /// "enable_thinking": false}`. `tools` and `documents` are none unless given here, as
    /// transformers passes them.
    std::string variables;
    /// What strftime_now formats: seconds since the Unix epoch, in UTC. Unset, the clock's
    /// current local time, as transformers formats it.
    std::optional<int64_t> now;
    Limits limits;
  };

  ChatTemplate();
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate &);
  ChatTemplate &operator=(const ChatTemplate &);

  /// Parses Jinja source. On a syntax error or a construct outside the subset returns false
  /// with "line L, column C: what" in `error`.
  bool parse(std::string_view source, std::string &error);
  /// Whether parse succeeded.
  bool valid() const { return template_ != nullptr; }
  /// Whether the template has `{% generation %}` blocks.
  bool hasGenerationBlocks() const;

  /// Renders the conversation `messages`: a JSON array of message objects, each with a role
  /// and content (a string, or a list of {"type": "text", "text": ...} parts) and whatever
  /// else the template reads (tool_calls, reasoning_content, ...). Into `generation`, when
  /// given, the byte ranges of `out` that `{% generation %}` blocks printed, in order. On
  /// failure returns false with "line L, column C: why" in `error`: an undefined value used,
  /// a type error, a limit reached, or a refusal of the template itself (raise_exception,
  /// which templates use to reject conversations they cannot render: "the template raised:
  /// Conversation roles must alternate user/assistant/user/assistant/...").
  bool render(const JsonValue &messages, const Options &options, std::string &out,
              std::string &error, std::vector<TextRange> *generation = nullptr) const;
  /// As above, with the conversation built in C++: a list of dicts (chat::Value::list of
  /// chat::Value::dict), or read from JSON with chat::Value::fromJson.
  bool render(const chat::Value &messages, const Options &options, std::string &out,
              std::string &error, std::vector<TextRange> *generation = nullptr) const;

private:
  std::shared_ptr<const chat::Template> template_;
};

/// The chat template built into Tessel under `name` (Jinja source, with generation blocks
/// around the assistant's replies), or null for a name it does not have. For models whose
/// tokenizer ships none; a tokenizer's own template is the one to prefer.
const char *builtinChatTemplate(std::string_view name);
/// The names builtinChatTemplate knows, in alphabetical order and separated by ", ", for
/// messages: "chatml, gemma, llama2, llama3, mistral, qwen3".
std::string builtinChatTemplateNames();

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATE_H
