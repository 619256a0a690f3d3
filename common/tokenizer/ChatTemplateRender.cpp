//===- ChatTemplateRender.cpp - Running a parsed chat template ------------===//
//
// Walks the template's tree as Jinja's generated Python runs it: a for loop's body gets a
// fresh scope each iteration (a `set` inside it is gone after the loop, which is why templates
// keep state in namespaces), `if` opens none, a macro reads the scope it was defined in at call
// time, transformers' generation block runs its body as a call block (its own scope) and
// records where its text lands in the output. Every value an expression makes is checked
// against the render's limits, so no template can exhaust the stack, the memory or the time.
// The statements run here; expressions are evaluated in ChatTemplateEvaluate.cpp.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplateRenderer.h"
#include "common/tokenizer/JsonReader.h"
#include "common/tokenizer/Utf8.h"

namespace tessel::tok {

namespace chat {

bool Renderer::emit(std::string_view text) {
  if (text.size() > st_.limits.maxOutputBytes - std::min(out_->size(), st_.limits.maxOutputBytes))
    return st_.fail("the output is longer than " + std::to_string(st_.limits.maxOutputBytes) +
                    " bytes");
  out_->append(text);
  return st_.step(text.size() / 64);
}

// Runs `body` with its output into `text` instead of the current output.
Renderer::Flow Renderer::capture(const Body &body, const ScopePtr &scope, std::string &text) {
  std::string *saved = out_;
  out_ = &text;
  Flow flow = exec(body, scope);
  out_ = saved;
  return flow;
}

Renderer::Flow Renderer::exec(const Body &body, const ScopePtr &scope) {
  for (const NodePtr &n : body) {
    Flow flow = node(*n, scope);
    if (flow != Flow::Next)
      return flow;
  }
  return Flow::Next;
}

Renderer::Flow Renderer::node(const Node &n, const ScopePtr &scope) {
  Nest nest(*this, n.at);
  if (!nest.ok)
    return Flow::Fail;
  switch (n.kind) {
  case Node::Kind::Text:
    return emit(n.text) ? Flow::Next : Flow::Fail;
  case Node::Kind::Output: {
    Value v;
    std::string text;
    if (!eval(*n.expr, scope, v))
      return Flow::Fail;
    st_.at = n.expr->at;
    return toStr(st_, v, text) && emit(text) ? Flow::Next : Flow::Fail;
  }
  case Node::Kind::If:
    for (size_t i = 0; i < n.bodies.size(); ++i) {
      if (i < n.conditions.size()) {
        Value test;
        if (!eval(*n.conditions[i], scope, test))
          return Flow::Fail;
        if (!test.truthy())
          continue;
      }
      return exec(n.bodies[i], scope);
    }
    return Flow::Next;
  case Node::Kind::For:
    return forLoop(n, scope);
  case Node::Kind::Set: {
    Value v;
    if (!eval(*n.expr, scope, v))
      return Flow::Fail;
    return assign(n, v, scope) ? Flow::Next : Flow::Fail;
  }
  case Node::Kind::SetBlock: {
    std::string text;
    if (capture(n.bodies[0], child(scope), text) == Flow::Fail)
      return Flow::Fail;
    scope->set(n.target.names[0], Value::string(std::move(text)));
    return Flow::Next;
  }
  case Node::Kind::Macro: {
    auto fn = std::make_shared<Callable>();
    fn->kind = Callable::Kind::Macro;
    fn->name = n.text;
    fn->macro = &n;
    fn->closure = scope;
    scope->set(n.text, Value::callable(std::move(fn)));
    return Flow::Next;
  }
  case Node::Kind::Generation: {
    std::string text;
    if (capture(n.bodies[0], child(scope), text) == Flow::Fail)
      return Flow::Fail;
    // transformers records the block where the top-level output stands when it returns.
    if (ranges_)
      ranges_->push_back(TextRange{root_.size(), root_.size() + text.size()});
    return emit(text) ? Flow::Next : Flow::Fail;
  }
  case Node::Kind::Break:
    return Flow::Break;
  case Node::Kind::Continue:
    return Flow::Continue;
  }
  return Flow::Next;
}

bool Renderer::unpack(const Target &target, const Value &v, Scope &scope, Location at) {
  if (!target.tuple) {
    scope.set(target.names[0], v);
    return true;
  }
  List parts;
  st_.at = at;
  if (!iterate(st_, v, parts))
    return false;
  size_t n = target.names.size();
  if (parts.size() != n)
    return fail(at, parts.size() > n
                        ? "too many values to unpack (expected " + std::to_string(n) + ")"
                        : "not enough values to unpack (expected " + std::to_string(n) + ", got " +
                              std::to_string(parts.size()) + ")");
  for (size_t i = 0; i < n; ++i)
    scope.set(target.names[i], parts[i]);
  return true;
}

bool Renderer::assign(const Node &n, const Value &v, const ScopePtr &scope) {
  if (n.target.attribute.empty())
    return unpack(n.target, v, *scope, n.at);
  Value ns;
  if (!lookup(n.target.names[0], scope, ns))
    return false;
  if (ns.kind() != Value::Kind::Namespace)
    return fail(n.at, "cannot assign attribute on non-namespace object");
  ns.namespaceAttributes().set(Value::string(n.target.attribute), v);
  return true;
}

Renderer::Flow Renderer::forLoop(const Node &n, const ScopePtr &scope) {
  Value iterable;
  List items;
  if (!eval(*n.expr, scope, iterable))
    return Flow::Fail;
  st_.at = n.expr->at;
  if (!iterate(st_, iterable, items))
    return Flow::Fail;
  if (n.filter) {
    List kept;
    for (const Value &item : items) {
      ScopePtr s = child(scope);
      Value keep;
      if (!st_.step() || !unpack(n.target, item, *s, n.at) || !eval(*n.filter, s, keep))
        return Flow::Fail;
      if (keep.truthy())
        kept.push_back(item);
    }
    items = std::move(kept);
  }
  int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    st_.at = n.at;
    if (!st_.step())
      return Flow::Fail;
    ScopePtr s = child(scope);
    auto state = std::make_shared<LoopState>();
    state->index0 = i;
    state->length = length;
    if (i > 0)
      state->previous = items[i - 1];
    if (i + 1 < length)
      state->next = items[i + 1];
    s->set("loop", Value::loop(std::move(state)));
    if (!unpack(n.target, items[i], *s, n.at))
      return Flow::Fail;
    Flow flow = exec(n.bodies[0], s);
    if (flow == Flow::Fail)
      return flow;
    if (flow == Flow::Break)
      break;
  }
  if (length == 0 && n.bodies.size() > 1)
    return exec(n.bodies[1], child(scope)) == Flow::Fail ? Flow::Fail : Flow::Next;
  return Flow::Next;
}

} // namespace chat

ChatTemplate::ChatTemplate() = default;
ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(const ChatTemplate &) = default;
ChatTemplate &ChatTemplate::operator=(const ChatTemplate &) = default;

bool ChatTemplate::parse(std::string_view source, std::string &error) {
  auto t = std::make_shared<chat::Template>();
  template_.reset();
  if (!chat::parseTemplate(source, *t, error))
    return false;
  template_ = std::move(t);
  return true;
}

bool ChatTemplate::hasGenerationBlocks() const { return template_ && template_->hasGeneration; }

bool ChatTemplate::render(const JsonValue &messages, const Options &options, std::string &out,
                          std::string &error, std::vector<TextRange> *generation) const {
  if (!messages.valid() || !messages.isArray()) {
    out.clear();
    if (generation)
      generation->clear();
    error = "the messages are not a JSON array";
    return false;
  }
  return render(chat::Value::fromJson(messages), options, out, error, generation);
}

bool ChatTemplate::render(const chat::Value &messages, const Options &options, std::string &out,
                          std::string &error, std::vector<TextRange> *generation) const {
  using chat::Value;
  out.clear();
  error.clear();
  if (generation)
    generation->clear();
  if (!template_) {
    error = "no chat template was parsed";
    return false;
  }
  if (!messages.isSequence()) {
    error = "the messages are not a list";
    return false;
  }
  // The variables transformers passes to the template.
  chat::Dict globals;
  auto set = [&](std::string name, Value v) {
    globals.set(Value::string(std::move(name)), std::move(v));
  };
  set("messages", messages);
  set("tools", Value::none());
  set("documents", Value::none());
  set("add_generation_prompt", Value::boolean(options.addGenerationPrompt));
  if (!options.bosToken.empty())
    set("bos_token", Value::string(repairUtf8(options.bosToken)));
  if (!options.eosToken.empty())
    set("eos_token", Value::string(repairUtf8(options.eosToken)));
  if (!options.variables.empty()) {
    JsonDocument doc;
    std::string why;
    if (!doc.parse(options.variables, why) || !doc.root().isObject()) {
      error = "the template variables are not a JSON object" + (why.empty() ? "" : ": " + why);
      return false;
    }
    for (size_t i = 0; i < doc.root().size(); ++i)
      set(std::string(doc.root().key(i)), Value::fromJson(doc.root().value(i)));
  }

  chat::RenderState st;
  st.limits = options.limits;
  st.now = options.now;
  chat::Renderer renderer(st, globals, out, generation);
  bool ok = renderer.run(*template_);
  // Namespaces are the only mutable values, so every reference cycle runs through one.
  for (Value &ns : st.namespaces)
    ns.namespaceAttributes().clear();
  if (ok)
    return true;
  error = st.error;
  out.clear();
  if (generation)
    generation->clear();
  return false;
}

} // namespace tessel::tok
