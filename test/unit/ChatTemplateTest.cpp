//===- ChatTemplateTest.cpp - Tests of the chat-template renderer ---------===//
//
// The Jinja subset of common/tokenizer/ChatTemplate.h construct by construct: parse errors and
// where they point, whitespace control, loops, scopes, macros, filters, tests and methods, the
// generation blocks' ranges, raise_exception, and the limits that stop hostile templates.
// Byte-for-byte parity with Python's Jinja2 over published templates is
// test/Integration/Tokenizer/chat-template-parity.test.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplate.h"
#include "common/tokenizer/JsonReader.h"

#include <gtest/gtest.h>

#include <thread>

using namespace tessel;
using tok::ChatTemplate;
using tok::TextRange;

namespace {

const char *const kConversation = R"([
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Hi"},
  {"role": "assistant", "content": "Hello!"},
  {"role": "user", "content": "Bye"}
])";

/// Renders `source` with `messages` (JSON) and `variables` (a JSON object's text); the text, or
/// "error: " and the error.
std::string render(const std::string &source, const std::string &variables = "",
                   const char *messages = kConversation, ChatTemplate::Options options = {},
                   std::vector<TextRange> *generation = nullptr) {
  ChatTemplate chat;
  std::string error, out;
  if (!chat.parse(source, error))
    return "parse error: " + error;
  tok::JsonDocument doc;
  if (!doc.parse(messages, error))
    return "bad test messages: " + error;
  options.variables = variables;
  if (!chat.render(doc.root(), options, out, error, generation))
    return "error: " + error;
  return out;
}

std::string parseError(const std::string &source) {
  ChatTemplate chat;
  std::string error;
  if (chat.parse(source, error))
    return "(parsed)";
  EXPECT_FALSE(chat.valid());
  return error;
}

} // namespace

TEST(ChatTemplate, PrintsTextAndExpressions) {
  EXPECT_EQ(render("plain text"), "plain text");
  EXPECT_EQ(render("{{ messages[1].content }} {{ messages[1]['role'] }}"), "Hi user");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }}"),
            "7 3 -4 2 3.5");
  EXPECT_EQ(render("{{ 2 ** 10 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.0 }} {{ 1e-5 }}"),
            "1024 0.30000000000000004 1e+16 1000000000000000.0 1.0 1e-05");
  EXPECT_EQ(render("{{ none }} {{ true }} {{ [1, 'a', none, false, 1.5] }} {{ (1,) }}"),
            "None True [1, 'a', None, False, 1.5] (1,)");
  EXPECT_EQ(render("{{ {'a': [1, {'b': \"it's\"}]} }}"), "{'a': [1, {'b': \"it's\"}]}");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ nothing }} {{ 'ab' * 2 }} {{ [1] + [2] }}"),
            "a1None abab [1, 2]");
  EXPECT_EQ(render("{{ 'x\\ty\\n\\u00e9\\x41\\101' }}"), "x\ty\n\xC3\xA9"
                                                         "AA");
  EXPECT_EQ(render("{{ 'a' 'b' }} {{ 1_000 }} {{ 0x10 }}"), "ab 1000 16");
}

TEST(ChatTemplate, ComparesAndTestsAsPython) {
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ true == 1 }} {{ (1, 2) == [1, 2] }} {{ 1 < 2 < 3 }}"),
            "True True False True");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 3 not in [1, 2] }} {{ 'role' in messages[0] }}"),
            "True True True");
  EXPECT_EQ(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 3 is odd }}"),
            "False True True True");
  EXPECT_EQ(render("{{ 'a' is string }} {{ messages[0] is mapping }} {{ [] is sequence }} "
                   "{{ 1 is number }} {{ true is integer }} {{ 4 is divisibleby 2 }}"),
            "True True True True False True");
  EXPECT_EQ(render("{{ true and 'x' }} {{ 0 or 'y' }} {{ not '' }} {{ 'a' if false }}|"),
            "x y True |");
}

TEST(ChatTemplate, UndefinedValues) {
  // Jinja's default Undefined: empty and false, but an error once used further.
  EXPECT_EQ(render("[{{ missing }}]{% if missing %}yes{% endif %}{{ messages[0].nope }}"), "[]");
  EXPECT_EQ(render("{{ missing.attr }}"), "error: line 1, column 11: 'missing' is undefined");
  EXPECT_EQ(render("{{ missing + 1 }}"), "error: line 1, column 12: 'missing' is undefined");
  EXPECT_EQ(render("{{ messages[0].nope.x }}"),
            "error: line 1, column 20: 'dict object' has no attribute 'nope'");
  EXPECT_EQ(render("{{ missing|default('d') }} {{ missing|length }} {{ missing|list }}"), "d 0 []");
}

TEST(ChatTemplate, WhitespaceControl) {
  // transformers' trim_blocks and lstrip_blocks.
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("a\n  {# note #}\nb"), "a\nb");
  // Expressions neither trim nor strip.
  EXPECT_EQ(render("a\n  {{ 'x' }}\nb"), "a\n  x\nb");
  // '-' strips all whitespace on its side, '+' keeps it.
  EXPECT_EQ(render("a \n {%- if true -%} \n b {%- endif %}"), "ab");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif +%}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("  {{- 'x' -}}  \n"), "x");
  // Newlines read as "\n"; one trailing newline of the source is dropped.
  EXPECT_EQ(render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(ChatTemplate, LoopsAndScopes) {
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}"),
            "104TrueFalse4|213FalseFalse4|322FalseFalse4|431FalseTrue4|");
  EXPECT_EQ(render("{% for m in messages if m.role == 'user' %}{{ m.content }}{{ loop.length }}"
                   "{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}"),
            "Hi2Bye2empty");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"
                   "{% for k, v in {'c': 3}|items %}{{ k }}{{ v }}{% endfor %}"),
            "a=1;b=2;c3");
  EXPECT_EQ(render("{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}"
                   "{% for m in messages[1:3] %}{{ m.role[0] }}{% endfor %}"),
            "uausua");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}"
                   "{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0246");
  // A set inside a loop is the iteration's; namespaces carry state out.
  EXPECT_EQ(render("{% set n = 0 %}{% set ns = namespace(n=0) %}{% for m in messages %}"
                   "{% set n = n + 1 %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ n }} {{ ns.n }}"),
            "0 4");
  EXPECT_EQ(render("{% if true %}{% set x = 1 %}{% endif %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set a, b = 'xy' %}{{ b }}{{ a }}{% set s %}[{{ a }}]{% endset %}{{ s }}"),
            "yx[x]");
}

TEST(ChatTemplate, Macros) {
  EXPECT_EQ(render("{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!"
                   "{% endmacro %}{{ greet('A') }} {{ greet('B', greeting='Hi') }}"),
            "Hello, A! Hi, B!");
  EXPECT_EQ(render("{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}"
                   "{% endmacro %}{{ rec(3) }}"),
            "321");
  EXPECT_EQ(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "error: line 1, column 35: macro 'm' takes not more than 1 argument(s)");
}

TEST(ChatTemplate, FiltersAndMethods) {
  EXPECT_EQ(render("{{ '  x  '|trim }}|{{ messages|length }} {{ 'héllo'|length }} {{ 'ab'|upper }}"
                   " {{ 'hELLO'|capitalize }} {{ [3, 1, 2]|sort|join(',') }} {{ [1, 2]|first }}"),
            "x|4 5 AB Hello 1,2,3 1");
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|"
                   "join(' ') }} {{ messages|rejectattr('role', 'ne', 'system')|list|length }}"),
            "Hi Bye 1");
  EXPECT_EQ(render("{{ {'b': [1, 'é'], 'a': none}|tojson }}|{{ [1, {'k': 2}]|tojson(indent=2) }}"),
            "{\"b\": [1, \"é\"], \"a\": null}|[\n  1,\n  {\n    \"k\": 2\n  }\n]");
  EXPECT_EQ(render("{{ '42'|int + 1 }} {{ '2.5'|float }} {{ 3|string ~ '!' }} {{ none|default(1) }}"
                   " {{ ''|default('e', true) }} {{ 'a-b'|replace('-', '+') }}"),
            "43 2.5 3! None e a+b");
  EXPECT_EQ(render("{{ 'a\\nb'|indent(2, true) }}|{{ ['a', 'A', 'b']|unique|list }}"),
            "  a\n  b|['a', 'b']");
  EXPECT_EQ(render("{{ ' a b '.strip() }}|{{ 'x</think>y'.split('</think>')[-1] }}|"
                   "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} "
                   "{{ 'a,b'.split(',') }} {{ {'k': 1}.get('k') }} {{ {'k': 1}.get('z', 0) }}"),
            "a b|y|True True ['a', 'b'] 1 0");
  EXPECT_EQ(render("{{ messages.append(1) }}"),
            "error: line 1, column 19: access to attribute 'append' of 'list' object is unsafe "
            "(transformers renders in Jinja's immutable sandbox)");
}

TEST(ChatTemplate, Globals) {
  ChatTemplate::Options options;
  options.now = 1721952000; // 2024-07-26 00:00:00 UTC
  options.bosToken = "<s>";
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }} {{ bos_token }}[{{ eos_token }}] "
                   "{{ add_generation_prompt }} {{ tools }} {{ range(3)|list }}",
                   "", kConversation, options),
            "26 Jul 2024 <s>[] False None [0, 1, 2]");
  EXPECT_EQ(render("{{ tools|length }} {{ enable_thinking }}",
                   R"({"tools": [{"name": "f"}], "enable_thinking": false})"),
            "1 False");
  EXPECT_EQ(render("x", "[1]"), "error: the template variables are not a JSON object");
}

TEST(ChatTemplate, RaiseException) {
  std::string out = render("{% for m in messages %}{% if m.role == 'system' %}"
                           "{{ raise_exception('System role not supported') }}{% endif %}"
                           "{% endfor %}");
  EXPECT_EQ(out, "error: line 1, column 69: the template raised: System role not supported");
}

TEST(ChatTemplate, GenerationRanges) {
  std::vector<TextRange> ranges;
  std::string out = render("{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}"
                           "{% generation %}{{ m.content }}<end>{% endgeneration %}"
                           "{% else %}{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}",
                           "", kConversation, {}, &ranges);
  ASSERT_EQ(out, "system: Be brief.\nuser: Hi\nassistant: Hello!<end>\nuser: Bye\n");
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(out.substr(ranges[0].begin, ranges[0].end - ranges[0].begin), "Hello!<end>");

  // Byte offsets, not characters; empty blocks are reported too.
  ranges.clear();
  out = render("é{% generation %}中文{% endgeneration %}{% generation %}{% endgeneration %}", "",
               kConversation, {}, &ranges);
  EXPECT_EQ(out, "é中文");
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], (TextRange{2, 8}));
  EXPECT_EQ(ranges[1], (TextRange{8, 8}));

  ChatTemplate chat;
  std::string error;
  ASSERT_TRUE(chat.parse("{% generation %}x{% endgeneration %}", error)) << error;
  EXPECT_TRUE(chat.hasGenerationBlocks());
  ASSERT_TRUE(chat.parse("x", error));
  EXPECT_FALSE(chat.hasGenerationBlocks());
}

TEST(ChatTemplate, ParseErrorsSayWhere) {
  EXPECT_EQ(parseError("{% if x %}a"),
            "line 1, column 4: the 'if' is not closed: the template ends without 'elif' or "
            "'else' or 'endif'");
  EXPECT_EQ(parseError("a\n{{ x |nofilter }}"),
            "line 2, column 7: no filter named 'nofilter' (outside the supported subset)");
  EXPECT_EQ(parseError("{{ x is nottest }}"),
            "line 1, column 9: no test named 'nottest' (outside the supported subset)");
  EXPECT_EQ(parseError("{% include 'x.jinja' %}"),
            "line 1, column 4: '{% include %}' is outside the supported subset of Jinja");
  EXPECT_EQ(parseError("{% raw %}x{% endraw %}"),
            "line 1, column 4: '{% raw %}' is outside the supported subset of Jinja");
  EXPECT_EQ(parseError("{% frobnicate %}"), "line 1, column 4: unknown statement 'frobnicate'");
  EXPECT_EQ(parseError("{% endfor %}"), "line 1, column 4: '{% endfor %}' closes no open block");
  EXPECT_EQ(parseError("{% break %}"), "line 1, column 4: 'break' outside a for loop");
  EXPECT_EQ(parseError("{{ x"), "line 1, column 1: the expression is not closed (no '}}')");
  EXPECT_EQ(parseError("{# x"), "line 1, column 1: the comment is not closed (no '#}')");
  EXPECT_EQ(parseError("{{ 'x }}"), "line 1, column 4: the string is not closed");
  EXPECT_EQ(parseError("{{ 1 +* 2 }}"), "line 1, column 7: expected an expression, found '*'");
  EXPECT_EQ(parseError("{{ a b }}"),
            "line 1, column 6: expected the end of the expression ('}}'), found 'b'");
  EXPECT_EQ(parseError("{{ x ) }}"), "line 1, column 6: unexpected ')'");
  EXPECT_EQ(parseError("{{ f(*args) }}"),
            "line 1, column 6: '*' and '**' arguments are outside the supported subset");
  EXPECT_EQ(parseError("{{ 'a' % 1 if '\\N{BULLET}' }}"),
            "line 1, column 16: \\N{...} escapes are outside the supported subset");
  EXPECT_EQ(parseError("{{ 99999999999999999999 }}"),
            "line 1, column 4: the integer is too large (Tessel's integers are 64-bit)");
  EXPECT_EQ(parseError("ok\n\xFF"), "line 2, column 1: the template is not valid UTF-8");
  EXPECT_EQ(parseError("{{ x @ y }}"), "line 1, column 6: unexpected character '@'");
}

TEST(ChatTemplate, RuntimeErrorsSayWhere) {
  EXPECT_EQ(render("\n  {{ 1 // 0 }}"),
            "error: line 2, column 8: integer division or modulo by zero");
  EXPECT_EQ(render("{{ 'a' + 1 }}"),
            "error: line 1, column 8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(render("{% set x = 1 %}{% set x.a = 2 %}"),
            "error: line 1, column 19: cannot assign attribute on non-namespace object");
  EXPECT_EQ(render("{{ 'x' % 1 }}"),
            "error: line 1, column 8: string formatting with '%' is outside the supported subset");
}

TEST(ChatTemplate, LimitsStopHostileTemplates) {
  ChatTemplate::Options small;
  small.limits.maxSteps = 10000;
  small.limits.maxOutputBytes = 1 << 16;
  EXPECT_NE(render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                   "{% endfor %}",
                   "", kConversation, small)
                .find("steps"),
            std::string::npos);
  EXPECT_NE(render("{% for i in range(5000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                   "{% endfor %}",
                   "", kConversation, small)
                .find("the output is longer than 65536 bytes"),
            std::string::npos);
  EXPECT_NE(render("{{ 'x' * 1000000 }}", "", kConversation, small).find("longer than"),
            std::string::npos);
  EXPECT_NE(render("{{ [1] * 1000000000000 }}").find("steps"), std::string::npos);
  EXPECT_NE(render("{{ range(1000000) }}").find("range too big"), std::string::npos);
  EXPECT_EQ(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "error: line 1, column 21: macro calls nest deeper than 64 levels");
  // Two calls per level: the steps stop the exponential tree long before it ends.
  EXPECT_NE(render("{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}"
                   "{% endmacro %}{{ f(0) }}",
                   "", kConversation, small)
                .find("steps"),
            std::string::npos);
  // Values nesting without end (through a namespace, the only mutable object).
  EXPECT_NE(render("{% set ns = namespace(v=[]) %}{% for i in range(5000) %}"
                   "{% set ns.v = [ns.v] %}{% endfor %}")
                .find("nests deeper than 1000 levels"),
            std::string::npos);
  // A namespace holding itself prints as deep as the limit allows, then stops.
  EXPECT_NE(render("{% set ns = namespace() %}{% set ns.self = [ns] %}{{ ns }}").find("deeper"),
            std::string::npos);
  // Parsing bounds nesting too.
  EXPECT_NE(parseError("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}")
                .find("nests deeper"),
            std::string::npos);
  std::string blocks;
  for (int i = 0; i < 100; ++i)
    blocks += "{% if true %}";
  EXPECT_NE(parseError(blocks).find("blocks nest deeper than 64 levels"), std::string::npos);
}

TEST(ChatTemplate, MessagesBuiltInCpp) {
  namespace chat = tok::chat;
  ChatTemplate t;
  std::string error, out;
  ASSERT_TRUE(t.parse("{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}", error));
  chat::Dict d;
  d.set(chat::Value::string("role"), chat::Value::string("user"));
  d.set(chat::Value::string("content"), chat::Value::string("hi"));
  ASSERT_TRUE(t.render(chat::Value::list({chat::Value::dict(std::move(d))}), {}, out, error))
      << error;
  EXPECT_EQ(out, "user=hi;");
  EXPECT_FALSE(t.render(chat::Value::string("x"), {}, out, error));
  EXPECT_EQ(error, "the messages are not a list");
  tok::JsonDocument doc;
  ASSERT_TRUE(doc.parse("{}", error));
  EXPECT_FALSE(t.render(doc.root(), {}, out, error));
  EXPECT_EQ(error, "the messages are not a JSON array");
  ChatTemplate unparsed;
  EXPECT_FALSE(unparsed.render(chat::Value::list({}), {}, out, error));
}

TEST(ChatTemplate, BuiltinTemplates) {
  EXPECT_EQ(tok::builtinChatTemplateNames(), "chatml, gemma, llama2, llama3, mistral, qwen3");
  EXPECT_EQ(tok::builtinChatTemplate("nope"), nullptr);
  const char *conversation = R"([{"role": "user", "content": "Hi"},
                                  {"role": "assistant", "content": "Hello!"}])";
  ChatTemplate::Options options;
  options.bosToken = "<s>";
  options.eosToken = "</s>";
  for (const char *name : {"chatml", "gemma", "llama2", "llama3", "mistral", "qwen3"}) {
    SCOPED_TRACE(name);
    const char *source = tok::builtinChatTemplate(name);
    ASSERT_NE(source, nullptr);
    std::vector<TextRange> ranges;
    std::string out = render(source, "", conversation, options, &ranges);
    ASSERT_EQ(out.find("error"), std::string::npos) << out;
    // Each marks the assistant's reply, with its end token, as the text to learn.
    ASSERT_EQ(ranges.size(), 1u);
    std::string reply = out.substr(ranges[0].begin, ranges[0].end - ranges[0].begin);
    EXPECT_EQ(reply.rfind("Hello!", 0) == 0 || reply.find("\n\nHello!") != std::string::npos, true)
        << reply;
    EXPECT_GT(reply.size(), std::string("Hello!").size()) << reply;
  }
  EXPECT_EQ(render(tok::builtinChatTemplate("chatml"), "", kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
}

TEST(ChatTemplate, RendersOnSeveralThreads) {
  ChatTemplate chat;
  std::string error;
  ASSERT_TRUE(chat.parse(tok::builtinChatTemplate("qwen3"), error)) << error;
  tok::JsonDocument doc;
  ASSERT_TRUE(doc.parse(kConversation, error));
  std::string expected;
  ASSERT_TRUE(chat.render(doc.root(), {}, expected, error)) << error;
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string out, why;
        same[t] += chat.render(doc.root(), {}, out, why) && out == expected;
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(same[t], 50);
}
