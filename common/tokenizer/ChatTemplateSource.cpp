//===- ChatTemplateSource.cpp - Which chat template a run uses ------------===//

#include "common/tokenizer/ChatTemplateSource.h"

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessel::tok {

namespace {

/// A template is a few kilobytes; a file far past that is not one.
constexpr uintmax_t kMaxTemplateBytes = uintmax_t(16) << 20;

bool readText(const std::string &path, std::string &out, std::string &error) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxTemplateBytes) {
    error = "cannot read '" + path + "': " +
            (ec ? ec.message() : std::to_string(size) + " bytes is too large for a template");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    error = "cannot read '" + path + "'";
    return false;
  }
  out = text.str();
  return true;
}

} // namespace

std::unique_ptr<ChatTemplate> loadChatTemplate(const std::string &name, const Tokenizer &tokenizer,
                                               const std::string &option, std::string &error) {
  std::string source, from;
  std::error_code ec;
  if (name.empty()) {
    if (tokenizer.chatTemplate().empty()) {
      error = "the tokenizer has no chat template (tokenizer_config.json's chat_template or "
              "chat_template.jinja): name one with " +
              option + " (a file, or a built-in: " + builtinChatTemplateNames() + ")";
      return nullptr;
    }
    source = tokenizer.chatTemplate();
    from = "the tokenizer's chat template";
  } else if (const char *builtin = builtinChatTemplate(name)) {
    source = builtin;
    from = "the built-in template '" + name + "'";
  } else if (std::filesystem::is_regular_file(name, ec)) {
    if (!readText(name, source, error)) {
      error = option + ": " + error;
      return nullptr;
    }
    from = "'" + name + "'";
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      // A tokenizer_config.json: its chat_template.
      JsonDocument config;
      std::string why;
      JsonValue chat;
      if (config.parse(source, why) && config.root().isObject())
        chat = config.root().find("chat_template");
      if (!chat.valid() || !chat.isString()) {
        error = option + ": '" + name + "' holds no chat_template string";
        return nullptr;
      }
      source = std::string(chat.string());
    }
  } else {
    error = option + ": '" + name + "' is neither a file nor a built-in template (" +
            builtinChatTemplateNames() + ")";
    return nullptr;
  }
  auto parsed = std::make_unique<ChatTemplate>();
  std::string why;
  if (!parsed->parse(source, why)) {
    error = from + " does not parse: " + why;
    return nullptr;
  }
  return parsed;
}

} // namespace tessel::tok
