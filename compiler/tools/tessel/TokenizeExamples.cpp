//===- TokenizeExamples.cpp - Fine-tuning examples from JSON lines --------===//

#include "TokenizeExamples.h"

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/Tokenizer.h"

namespace tessel {

namespace {

using tok::JsonValue;
namespace chat = tok::chat;

/// A piece of an example's text and whether its tokens are trained.
struct Piece {
  std::string text;
  bool trained = false;
};

bool isMessageList(const JsonValue &v) { return v.valid() && v.isArray(); }

} // namespace

LineKind lineKind(const JsonValue &line) {
  if (!line.isObject())
    return LineKind::Document;
  if (line.find("messages").valid())
    return LineKind::Chat;
  const JsonValue prompt = line.find("prompt"), completion = line.find("completion");
  if (prompt.valid() && completion.valid())
    return isMessageList(prompt) || isMessageList(completion) ? LineKind::Chat
                                                              : LineKind::Completion;
  return LineKind::Document;
}

namespace {

/// Checks one message of a conversation: an object with a string role, and content that is a
/// string, a list of parts, or absent/null (a turn that only calls tools).
bool checkMessage(const JsonValue &m, size_t index, std::string &error) {
  const std::string where = "message " + std::to_string(index);
  if (!m.isObject()) {
    error = where + " is " + m.kindName() + ", not an object with a role and content";
    return false;
  }
  const JsonValue role = m.find("role");
  if (!role.valid() || !role.isString()) {
    error = where + " has no string 'role'";
    return false;
  }
  const JsonValue content = m.find("content");
  if (content.valid() && !content.isString() && !content.isArray() && !content.isNull()) {
    error = where + " (" + std::string(role.string()) + ") has content that is " +
            content.kindName() + "; it is a string or a list of parts";
    return false;
  }
  return true;
}

/// The conversation of a chat line and which of its messages are trained: a `messages` line's
/// assistant turns, or a conversational completion's messages.
bool conversation(const JsonValue &line, chat::List &messages, std::vector<bool> &trained,
                  std::string &error) {
  auto add = [&](const JsonValue &list, const char *key, int trainWhat) {
    if (!list.isArray()) {
      error = std::string("'") + key + "' is " + list.kindName() + ", not a list of messages";
      return false;
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonValue m = list.at(i);
      if (!checkMessage(m, messages.size(), error)) {
        error = std::string("'") + key + "': " + error;
        return false;
      }
      messages.push_back(chat::Value::fromJson(m));
      // 0: assistant turns; 1: every message; 2: none.
      trained.push_back(trainWhat == 1 ||
                        (trainWhat == 0 && m.find("role").string() == "assistant"));
    }
    return true;
  };
  const JsonValue list = line.find("messages");
  if (list.valid())
    return add(list, "messages", 0);
  return add(line.find("prompt"), "prompt", 2) && add(line.find("completion"), "completion", 1);
}

/// Whether `a` starts with `b`.
bool startsWith(const std::string &a, const std::string &b) {
  return a.size() >= b.size() && a.compare(0, b.size(), b) == 0;
}

/// The chat line's pieces, by the template's generation marks or by rendering growing
/// prefixes of the conversation.
bool chatPieces(const JsonValue &line, const ExampleRecipe &recipe, std::vector<Piece> &pieces,
                std::string &error) {
  if (!recipe.chat) {
    error = recipe.noChatReason;
    return false;
  }
  chat::List messages;
  std::vector<bool> trained;
  if (!conversation(line, messages, trained, error))
    return false;
  if (messages.empty()) {
    error = "the conversation has no messages";
    return false;
  }
  tok::ChatTemplate::Options options;
  options.bosToken = recipe.bosToken;
  options.eosToken = recipe.eosToken;
  const tok::ChatTemplate &tmpl = *recipe.chat;
  auto render = [&](size_t count, bool generationPrompt, std::string &out,
                    std::vector<tok::TextRange> *marks) {
    options.addGenerationPrompt = generationPrompt;
    chat::List prefix(messages.begin(), messages.begin() + static_cast<long>(count));
    if (!tmpl.render(chat::Value::list(std::move(prefix)), options, out, error, marks)) {
      error = "the chat template: " + error;
      return false;
    }
    return true;
  };

  std::string full;
  std::vector<tok::TextRange> marks;
  if (!render(messages.size(), false, full, &marks))
    return false;
  if (tmpl.hasGenerationBlocks() && line.find("messages").valid()) {
    // The template says what the model generates. (A conversational completion trains its
    // own messages, found as below, whatever the template marks in its prompt.)
    size_t at = 0;
    for (const tok::TextRange &r : marks) {
      if (r.begin > at)
        pieces.push_back({full.substr(at, r.begin - at), false});
      if (r.end > r.begin)
        pieces.push_back({full.substr(r.begin, r.end - r.begin), true});
      at = r.end;
    }
    if (at < full.size())
      pieces.push_back({full.substr(at), false});
    return true;
  }
  // Each trained message is what rendering up to it adds to rendering up to its generation
  // prompt; the text between comes from the messages that are not trained.
  std::string done;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!trained[i])
      continue;
    std::string prompt, through;
    if (!render(i, true, prompt, nullptr) || !render(i + 1, false, through, nullptr))
      return false;
    if (!startsWith(prompt, done) || !startsWith(through, prompt) || !startsWith(full, through)) {
      error = "the chat template renders the conversation's earlier turns differently as it "
              "grows (at message " +
              std::to_string(i) + "), so which tokens are message " + std::to_string(i) +
              "'s is ambiguous; mark the assistant's text with {% generation %} ... "
              "{% endgeneration %} in the template (--chat-template FILE), or train on every "
              "token (--train-on all)";
      return false;
    }
    if (prompt.size() > done.size())
      pieces.push_back({prompt.substr(done.size()), false});
    pieces.push_back({through.substr(prompt.size()), true});
    done = std::move(through);
  }
  if (full.size() > done.size())
    pieces.push_back({full.substr(done.size()), false});
  return true;
}

/// A plain prompt and completion: the prompt with the tokenizer's special tokens, then the
/// completion and the end-of-sequence token, trained.
bool completionPieces(const JsonValue &line, std::vector<Piece> &pieces, std::string &error) {
  const JsonValue prompt = line.find("prompt"), completion = line.find("completion");
  for (auto [v, key] : {std::pair{prompt, "prompt"}, std::pair{completion, "completion"}})
    if (!v.isString()) {
      error = std::string("'") + key + "' is " + v.kindName() + ", not a string";
      return false;
    }
  pieces.push_back({std::string(prompt.string()), false});
  pieces.push_back({std::string(completion.string()), true});
  return true;
}

} // namespace

bool buildExample(const JsonValue &line, LineKind kind, const ExampleRecipe &recipe,
                  std::vector<uint32_t> &ids, std::vector<uint8_t> &trained, std::string &error) {
  ids.clear();
  trained.clear();
  std::vector<Piece> pieces;
  if (kind == LineKind::Chat ? !chatPieces(line, recipe, pieces, error)
                             : !completionPieces(line, pieces, error))
    return false;
  const tok::Tokenizer &tokenizer = *recipe.tokenizer;
  for (size_t i = 0; i < pieces.size(); ++i) {
    // A plain prompt gets the tokenizer's own special tokens; a template writes its own.
    const bool special = kind == LineKind::Completion && i == 0 && recipe.addSpecialTokens;
    tokenizer.encodeAppend(pieces[i].text, special, ids);
    trained.resize(ids.size(), pieces[i].trained || recipe.trainOnAll);
  }
  if (kind == LineKind::Completion && recipe.eos) {
    ids.push_back(*recipe.eos);
    trained.push_back(1);
  }
  if (!trained.empty())
    trained[0] = 0; // The first token is predicted from nothing.
  if (ids.size() < 2) {
    error = "the example encodes to " + std::to_string(ids.size()) +
            " token(s); an example needs 2 or more";
    return false;
  }
  bool any = false;
  for (uint8_t t : trained)
    any |= t != 0;
  if (!any) {
    error = kind == LineKind::Chat ? "the conversation has no assistant turn to train on"
                                   : "the completion encodes to no token";
    return false;
  }
  return true;
}

} // namespace tessel
