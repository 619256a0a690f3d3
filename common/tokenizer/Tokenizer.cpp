//===- Tokenizer.cpp - Loading a tokenizer from a file or a model folder --===//

#include "common/tokenizer/Tokenizer.h"

#include "common/tokenizer/HfTokenizer.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/SentencePieceTokenizer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tessel::tok {

namespace fs = std::filesystem;

Tokenizer::~Tokenizer() = default;

bool haveRegexSupport() { return regexAvailable(); }

namespace {

/// Tokenizer files are tens of megabytes; anything near this is not one.
constexpr uintmax_t kMaxFileBytes = uintmax_t(2) << 30;

bool readFile(const std::string &path, std::string &out, std::string &error) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    error = path + ": cannot read: " + ec.message();
    return false;
  }
  if (size > kMaxFileBytes) {
    error = path + ": " + std::to_string(size) + " bytes is too large for a tokenizer file";
    return false;
  }
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  out.resize(size);
  size_t got = size ? std::fread(out.data(), 1, size, f) : 0;
  bool failed = std::ferror(f);
  std::fclose(f);
  if (failed || got != size) {
    error = path + ": cannot read: " + (failed ? std::strerror(errno) : "the file shrank");
    return false;
  }
  return true;
}

/// What tokenizer_config.json says that Tessel uses.
struct TokenizerConfig {
  std::optional<std::string> bos, eos;
  std::string chatTemplate;
  bool addBos = true, addEos = false; // SentencePiece's LlamaTokenizer defaults
};

/// A token named in the config: a string, or an object whose "content" is one.
bool configToken(JsonValue v, const char *key, const std::string &file,
                 std::optional<std::string> &out, std::string &error) {
  if (!v.valid() || v.isNull())
    return true;
  if (v.isObject())
    v = v.find("content");
  if (!v.valid() || !v.isString()) {
    error = file + ": " + key + " must be a token's text (or an object with its \"content\")";
    return false;
  }
  out = std::string(v.string());
  return true;
}

bool readConfig(const std::string &file, TokenizerConfig &config, std::string &error) {
  std::string text;
  if (!readFile(file, text, error))
    return false;
  JsonDocument doc;
  std::string why;
  if (!doc.parse(text, why)) {
    error = file + ": not valid JSON: " + why;
    return false;
  }
  JsonValue root = doc.root();
  if (!root.isObject()) {
    error = file + ": a tokenizer_config.json holds an object";
    return false;
  }
  if (!configToken(root.find("bos_token"), "bos_token", file, config.bos, error) ||
      !configToken(root.find("eos_token"), "eos_token", file, config.eos, error))
    return false;
  for (const char *key : {"add_bos_token", "add_eos_token"}) {
    JsonValue v = root.find(key);
    if (!v.valid() || v.isNull())
      continue;
    if (!v.isBool()) {
      error = file + ": " + key + " must be true or false";
      return false;
    }
    (std::strcmp(key, "add_bos_token") == 0 ? config.addBos : config.addEos) = v.boolean();
  }
  // The chat template: a string, or a list of {name, template} whose "default" is the one.
  JsonValue chat = root.find("chat_template");
  if (chat.valid() && chat.isString()) {
    config.chatTemplate = std::string(chat.string());
  } else if (chat.valid() && chat.isArray()) {
    for (size_t i = 0; i < chat.size(); ++i) {
      JsonValue entry = chat.at(i);
      JsonValue name = entry.find("name"), body = entry.find("template");
      if (name.valid() && name.isString() && body.valid() && body.isString() &&
          (config.chatTemplate.empty() || name.string() == "default"))
        config.chatTemplate = std::string(body.string());
    }
  } else if (chat.valid() && !chat.isNull()) {
    error = file + ": chat_template must be a string or a list of {name, template}";
    return false;
  }
  return true;
}

bool isFile(const fs::path &p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

} // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path, std::string &error) {
  std::error_code ec;
  fs::path file = path;
  fs::path folder;
  if (fs::is_directory(file, ec)) {
    folder = file;
    if (isFile(folder / "tokenizer.json"))
      file = folder / "tokenizer.json";
    else if (isFile(folder / "tokenizer.model"))
      file = folder / "tokenizer.model";
    else {
      error = path + ": the folder holds neither tokenizer.json nor tokenizer.model";
      return nullptr;
    }
  } else if (!fs::exists(file, ec)) {
    error = path + ": no such file or folder";
    return nullptr;
  } else {
    folder = file.parent_path();
  }

  TokenizerConfig config;
  fs::path configFile = (folder.empty() ? fs::path(".") : folder) / "tokenizer_config.json";
  if (isFile(configFile) && !readConfig(configFile.string(), config, error))
    return nullptr;

  const std::string name = file.string();
  std::string text;
  if (!readFile(name, text, error))
    return nullptr;
  // By the name, else by the content: JSON starts with '{' or '[' after whitespace, a
  // SentencePiece model (a protobuf) with a field tag.
  const std::string extension = file.extension().string();
  size_t first = text.find_first_not_of(" \t\r\n");
  const bool json = extension == ".json" || (extension != ".model" && first != std::string::npos &&
                                             (text[first] == '{' || text[first] == '['));
  std::unique_ptr<Tokenizer> tokenizer;
  if (json) {
    std::unique_ptr<HfTokenizer> hf = HfTokenizer::fromJson(name, text, error);
    if (!hf)
      return nullptr;
    // GPT-2's tokenizer.json names no end of text; these are the names files give it.
    if (!hf->eos_ && !config.eos) {
      for (const char *candidate : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>"}) {
        for (const AddedToken &t : hf->addedTokens())
          if (t.special && t.content == candidate)
            hf->eos_ = t.id;
        if (hf->eos_)
          break;
      }
    }
    tokenizer = std::move(hf);
  } else {
    text.clear();
    tokenizer = loadSentencePiece(name, config.addBos, config.addEos, error);
    if (!tokenizer)
      return nullptr;
  }
  for (auto [named, id] :
       {std::pair{&config.bos, &tokenizer->bos_}, std::pair{&config.eos, &tokenizer->eos_}}) {
    if (!*named)
      continue;
    std::optional<uint32_t> found = tokenizer->tokenToId(**named);
    if (!found) {
      error = configFile.string() + ": " + (named == &config.bos ? "bos_token" : "eos_token") +
              " '" + **named + "' is not a token of " + name;
      return nullptr;
    }
    *id = *found;
  }
  // transformers 4.43 and later save the template beside the config as chat_template.jinja.
  fs::path jinja = (folder.empty() ? fs::path(".") : folder) / "chat_template.jinja";
  if (config.chatTemplate.empty() && isFile(jinja) &&
      !readFile(jinja.string(), config.chatTemplate, error))
    return nullptr;
  tokenizer->chatTemplate_ = std::move(config.chatTemplate);
  tokenizer->description_ = file.filename().string() + ": " + tokenizer->description_;
  return tokenizer;
}

} // namespace tessel::tok
