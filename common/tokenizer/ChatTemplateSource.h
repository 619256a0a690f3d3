//===- ChatTemplateSource.h - Which chat template a run uses ----*- C++ -*-===//
//
// `tessel tokenize --chat-template` and the runner's `--generate --chat --chat-template` name a
// chat template the same way: a built-in template's name (ChatTemplate.h), a file holding one
// (a .jinja file, or a tokenizer_config.json whose chat_template it is), or nothing, for the
// tokenizer's own (its tokenizer_config.json's chat_template or its chat_template.jinja).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_CHATTEMPLATESOURCE_H
#define TESSEL_COMMON_TOKENIZER_CHATTEMPLATESOURCE_H

#include <memory>
#include <string>

namespace tessel::tok {

class ChatTemplate;
class Tokenizer;

/// The template `name` names (empty: `tokenizer`'s), parsed. Null with the reason where there
/// is none, the file cannot be read, or the template does not parse; the reason lists the
/// built-in templates where that helps. `option` names the option in messages
/// ("--chat-template").
std::unique_ptr<ChatTemplate> loadChatTemplate(const std::string &name, const Tokenizer &tokenizer,
                                               const std::string &option, std::string &error);

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_CHATTEMPLATESOURCE_H
