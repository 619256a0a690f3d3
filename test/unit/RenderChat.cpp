//===- RenderChat.cpp - Chat templates rendered, for tests ----------------===//
//
// tessel-render-chat: the Tessel side of the chat-template reference test against Python's
// Jinja2 (test/Integration/Tokenizer/chat-template-parity.test).
//
//   tessel-render-chat --list            the built-in templates' names, one a line
//   tessel-render-chat --builtin NAME    a built-in template's source
//   tessel-render-chat CASES.jsonl       renders each case, one JSON object a line:
//       {"template": SOURCE or "builtin": NAME, "messages": [...],
//        "add_generation_prompt": false, "bos_token": "", "eos_token": "",
//        "variables": "{...}" (a JSON object's text), "now": SECONDS}
//     and prints one JSON line for each: {"ok": true, "text": ..., "generation": [[b, e], ...]}
//     or {"ok": false, "error": ...}
//
//===----------------------------------------------------------------------===//

#include "common/support/JsonString.h"
#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/JsonReader.h"

#include <fstream>
#include <iostream>

using namespace tessel;

namespace {

int usage() {
  std::cerr << "usage: tessel-render-chat (--list | --builtin NAME | CASES.jsonl)\n";
  return 2;
}

std::string renderCase(std::string_view line) {
  std::string error;
  tok::JsonDocument doc;
  std::string out = "{\"ok\": false, \"error\": ";
  auto failed = [&](const std::string &why) {
    appendJsonString(out, why);
    return out + "}";
  };
  if (!doc.parse(line, error) || !doc.root().isObject())
    return failed("the case is not a JSON object: " + error);
  tok::JsonValue root = doc.root();
  // A member's text, empty where it is missing or no string.
  auto text = [&](const char *key) {
    tok::JsonValue v = root.find(key);
    return v.valid() && v.isString() ? std::string(v.string()) : std::string();
  };
  std::string source = text("template");
  if (!text("builtin").empty()) {
    const char *builtin = tok::builtinChatTemplate(text("builtin"));
    if (!builtin)
      return failed("no built-in template named '" + text("builtin") + "'");
    source = builtin;
  }
  tok::ChatTemplate chat;
  if (!chat.parse(source, error))
    return failed("parse: " + error);
  tok::ChatTemplate::Options options;
  tok::JsonValue agp = root.find("add_generation_prompt"), now = root.find("now");
  options.addGenerationPrompt = agp.valid() && agp.boolean();
  options.bosToken = text("bos_token");
  options.eosToken = text("eos_token");
  options.variables = text("variables");
  if (now.valid() && now.isInteger())
    options.now = now.integer();
  std::string rendered;
  std::vector<tok::TextRange> generation;
  if (!chat.render(root.find("messages"), options, rendered, error, &generation))
    return failed(error);
  out = "{\"ok\": true, \"text\": ";
  appendJsonString(out, rendered);
  out += ", \"generation\": [";
  for (size_t i = 0; i < generation.size(); ++i)
    out += (i ? ", [" : "[") + std::to_string(generation[i].begin) + ", " +
           std::to_string(generation[i].end) + "]";
  return out + "]}";
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && std::string(argv[1]) == "--list") {
    std::string names = tok::builtinChatTemplateNames();
    for (size_t at = 0; at != std::string::npos;) {
      size_t comma = names.find(", ", at);
      std::cout << names.substr(at, comma - at) << "\n";
      at = comma == std::string::npos ? comma : comma + 2;
    }
    return 0;
  }
  if (argc == 3 && std::string(argv[1]) == "--builtin") {
    const char *source = tok::builtinChatTemplate(argv[2]);
    if (!source) {
      std::cerr << "tessel-render-chat: no built-in template named '" << argv[2] << "'\n";
      return 1;
    }
    std::cout << source;
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-')
    return usage();
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "tessel-render-chat: cannot read " << argv[1] << "\n";
    return 2;
  }
  std::string line;
  while (std::getline(in, line))
    if (!line.empty())
      std::cout << renderCase(line) << "\n";
  return 0;
}
