"""Tessel's chat templates against Python's Jinja2, rendering as transformers does.

    chat_template_parity.py --tool TESSEL_RENDER_CHAT --work DIR --templates DIR [--show-refusals]

The reference is jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
with transformers' additions: the loop controls extension, a `{% generation %}` extension that
records where its blocks land (transformers' AssistantTracker), tojson as json.dumps(x,
ensure_ascii=False, indent=indent, ...), raise_exception and strftime_now (at a fixed time
here), and the variables transformers passes (messages, tools=None, documents=None,
add_generation_prompt, the special tokens).

Renders every template of DIR (in the form published models ship them) and every built-in
template of the tool over several conversations, with and without the generation prompt,
tools, extra variables and special tokens; then many small templates, one construct each.
Compares the text byte for byte and the generation blocks' byte ranges; where the reference
fails, Tessel must fail too (with raise_exception's message where the template raised). Prints
the counts and every difference (with --show-refusals, both sides' reasons where both refuse);
exits 1 on any.
"""
import argparse
import copy
import datetime
import json
import os
import subprocess
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = 1721952000  # 2024-07-26 00:00:00 UTC


class Raised(jinja2.exceptions.TemplateError):
    """raise_exception's error, told apart from Jinja's own."""


class AssistantTracker(Extension):
    """transformers' generation blocks: a call block that records its text's position."""

    tags = {"generation"}

    def __init__(self, environment):
        super().__init__(environment)
        self.blocks = None
        self.indices = None

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_generation_support")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        rv = caller()
        if self.blocks is not None:
            start = len("".join(self.blocks))
            self.indices.append((start, start + len(rv)))
        return rv


def make_environment():
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_environment()
TRACKER = ENV.extensions[AssistantTracker.identifier]


def reference(case):
    """(ok, text or error, generation byte ranges) as transformers renders the case."""
    try:
        template = ENV.from_string(case["template"])
        # A copy: a few Jinja filters change a list they are given (indent extends it).
        kwargs = {"messages": copy.deepcopy(case["messages"]), "tools": None, "documents": None,
                  "add_generation_prompt": case["add_generation_prompt"]}
        for token in ("bos_token", "eos_token"):
            if case[token]:
                kwargs[token] = case[token]
        kwargs.update(json.loads(case["variables"]) if case["variables"] else {})
        TRACKER.blocks, TRACKER.indices = [], []
        try:
            for block in template.generate(**kwargs):
                TRACKER.blocks.append(block)
            text = "".join(TRACKER.blocks)
            indices = TRACKER.indices
        finally:
            TRACKER.blocks = TRACKER.indices = None
    except Raised as error:
        return False, "the template raised: " + str(error), []
    except Exception as error:  # every other refusal: Tessel must refuse too
        return False, "%s: %s" % (type(error).__name__, error), []
    def at(i):
        return len(text[:i].encode("utf-8"))
    return True, text, [[at(b), at(e)] for b, e in indices]


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather in a city, in °C.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Zürich"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web.",
        "parameters": {"type": "object", "properties": {
            "q": {"type": "string"},
            "filters": {"type": "array", "items": {"type": "string"}},
            "options": {"type": "object", "additionalProperties": {"type": "number"},
                        "description": "  Weights.  "},
            "mode": {"type": ["string", "integer"]}}},
        "return": {"type": "array", "description": "The hits."}}},
]

CONVERSATIONS = {
    "single": [{"role": "user", "content": "Hello!"}],
    "system": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 = 4."},
        {"role": "user", "content": "And 3 + 3?"},
    ],
    "multi-turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
        {"role": "user", "content": "Why?"},
        {"role": "assistant", "content": "To get to the other side."},
    ],
    "unicode": [
        {"role": "system", "content": "Réponds en français. 日本語も可。"},
        {"role": "user", "content": "  Ünïcödé: 中文, العربية, עברית, 👍🏽 👨\u200d👩\u200d👧 🇫🇷  \n"},
        {"role": "assistant", "content": "\n\tBien sûr ! « Voilà » — “quotes” 'single' \\back\\slash\n"},
        {"role": "user", "content": "e\u0301 \u00a0nbsp\u2028sep \u3000ideo"},
    ],
    "parts": [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Describe "},
                                     {"type": "image"},
                                     {"type": "text", "text": "this picture."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat on a mat."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
    ],
    "assistant-last": [
        {"role": "user", "content": "Write a haiku."},
        {"role": "assistant", "content": "Old pond —\na frog leaps in,\nwater's sound."},
    ],
    "tools": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Zürich for 3 days?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call12345", "type": "function", "function": {
                "name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}}]},
        {"role": "tool", "tool_call_id": "call12345",
         "content": "{\"temperature\": [21.5, 19.0, 23.25], \"unit\": \"°C\"}"},
        {"role": "tool", "tool_call_id": "call12345", "content": "second result"},
        {"role": "assistant", "content": "Sunny, 19 to 23 °C."},
        {"role": "user", "content": "Thanks!"},
    ],
    "thinking": [
        {"role": "user", "content": "What is 17 * 3?"},
        {"role": "assistant", "content": "<think>\n17 * 3 = 51\n</think>\n\n51."},
        {"role": "user", "content": "And 17 * 4?"},
        {"role": "assistant", "content": "68.", "reasoning_content": "17 * 4 = 68, easy."},
        {"role": "user", "content": "<tool_response>x</tool_response>"},
        {"role": "assistant", "content": "<think>more</think>Done."},
    ],
    "not-alternating": [
        {"role": "user", "content": "One"},
        {"role": "user", "content": "Two"},
    ],
    "empty": [],
    "whitespace": [
        {"role": "system", "content": "   \n\n  "},
        {"role": "user", "content": "\n\n  padded question  \n\n"},
        {"role": "assistant", "content": "   padded answer\t"},
    ],
    "tool-content-object": [
        {"role": "user", "content": "Look it up"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "search", "arguments": {"q": "x"}}}]},
        {"role": "tool", "content": {"result": [1, 2.5, None, True], "note": "ok"}},
    ],
}

VARIANTS = {
    "plain": ("<|bos|>", "<|eos|>", {}),
    "tools": ("<s>", "</s>", {"tools": TOOLS, "enable_thinking": False}),
    "extras": ("<s>", "</s>", {"builtin_tools": ["brave_search", "code_interpreter"],
                               "date_string": "01 Jan 2025", "tools_in_user_message": False,
                               "tools": TOOLS[:1], "enable_thinking": True}),
    "no-tokens": ("", "", {}),
}

# Small templates, one construct each, rendered with the variables of SNIPPET_VARIABLES.
SNIPPET_VARIABLES = {
    "x": 5, "s": "Hello World", "d": {"b": 2, "a": 1, "keys": "k"}, "l": [3, 1, 2], "f": 1.5,
    "n": None, "u": "héllo wörld 中文 😀", "t": True,
    "nested": {"name": "f", "args": [1, 2.5, "x", None, False, {"k": "é"}], "empty": {}},
}
SNIPPETS = [
    # Whitespace control, trim_blocks, lstrip_blocks, comments, newlines.
    "a\n  {% if true %}\n  b\n  {% endif %}\nc",
    "a {%- if true -%} b {%- endif -%} c",
    "  {{- x -}}  ",
    "{% for i in l %}\n{{ i }}\n{% endfor %}",
    "x  {#- c -#}  y",
    "x\n  {# c #}\ny",
    "  {%+ if true %} y{% endif %}",
    "  {{ x }}\n  {% if true %}z{% endif +%}\nq",
    "\t\t{% if true %}\n\tx\n\t{% endif %}\n",
    "a\r\nb{% if true %}\r\nc{% endif %}\r\n",
    "text with trailing newlines\n\n",
    "  {%- if true %}x{% endif %}",
    "{% if true %}   \n{% endif %}",
    "line\n    {%- if true %}\n    x\n    {%- endif %}\n",
    "{{ '{{' }} {{ '}}' }} {{ {'a': {'b': 1}} }}",
    "{{ x }}{#\nmulti\nline comment\n#}{{ x }}",
    # Literals and how values print.
    "{{ 1 }} {{ 1.0 }} {{ 1.5e10 }} {{ 1e16 }} {{ 0.1 + 0.2 }} {{ -0.0 }} {{ 1_000 }} {{ 0x1F }} "
    "{{ 0o17 }} {{ 0b101 }} {{ 3.0e-5 }} {{ 2.5E+3 }} {{ 123456789.125 }} {{ 1e-7 }} {{ 00 }}",
    "{{ none }} {{ true }} {{ False }} {{ [1, 'a', none, true, 1.5] }} {{ (1,) }} {{ () }} "
    "{{ {'a': [1, {'b': none}]} }} {{ nested }} {{ [] }} {{ {} }}",
    "{{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }} {{ ['it\\'s', 'say \"hi\"', 'both \\' \"', "
    "'tab\\there', 'nl\\n', '\\x01\\x7f', 'é中😀', '\\\\', '\\r'] }}",
    "{{ 'a' 'b' \"c\" }} {{ '\\u00e9\\U0001F600\\101\\x41\\q\\0' }}",
    # Operators.
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} "
    "{{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 4.0 % -2 }} {{ 1 / 3 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ -x + 1 }} {{ - -x }} {{ +x }} {{ true + 1 }} "
    "{{ 1 + 1.5 }} {{ x - 10 }} {{ 2 * 2.5 }} {{ -x ** 2 }}",
    "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 3 * 'ab' }} {{ [1] + [2] }} {{ [1, 2] * 2 }} "
    "{{ (1,) + (2,) }} {{ 'x' * 0 }} {{ 'x' * -2 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ undefined_var ~ [1] ~ 1.0 }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' == 'a' }} {{ [1,2] == [1,2] }} {{ (1,2) == [1,2] }} "
    "{{ {'a':1} == {'a':1} }} {{ none == none }} {{ 1 != 2 }} {{ undefined_var == none }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 <= 1.0 }} "
    "{{ 2 >= 3 }} {{ 'é' > 'z' }}",
    "{{ 'a' in 'cat' }} {{ 1 in [1,2] }} {{ 'a' in {'a': 1} }} {{ 3 not in [1,2] }} "
    "{{ 'x' in undefined_var }} {{ 'x' not in 'y' }}",
    "{{ true and 'x' }} {{ false or 'y' }} {{ 0 or none }} {{ '' and 1 }} {{ not 0 }} "
    "{{ not not 'a' }} {{ not x is none }} {{ x is not none and not t }}",
    "{{ 'yes' if x > 3 else 'no' }} {{ 'a' if false }}|{{ 'b' if false else 'c' if true else 'd' }}",
    # Attributes, items, slices.
    "{{ d['keys'] }} {{ d.missing }}|{{ l[0] }} {{ l[-1] }} {{ l[5] }}|{{ l[1:] }} {{ l[::-1] }} "
    "{{ l[:-1] }} {{ l[::2] }} {{ l[5:] }} {{ l[-100:100] }} {{ l[2:0:-1] }} {{ (1, 2, 3)[1:] }}",
    "{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ u[1] }} {{ u[-2:] }} {{ u[::-1] }} {{ s[100] }}",
    "{{ messages[0].role }} {{ messages.0.role }} {{ messages[-1]['content'] }} {{ n.x }}|{{ x.y }}",
    # Tests.
    "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ n is none }} {{ x is number }} "
    "{{ f is number }} {{ t is number }} {{ x is integer }} {{ t is integer }} {{ f is float }} "
    "{{ t is boolean }} {{ t is true }} {{ t is false }} {{ x is even }} {{ x is odd }} "
    "{{ x is divisibleby 5 }} {{ x is divisibleby(2) }} {{ f is integer }}",
    "{{ s is string }} {{ d is mapping }} {{ l is sequence }} {{ s is sequence }} "
    "{{ d is iterable }} {{ x is iterable }} {{ y is iterable }} {{ y is sequence }} "
    "{{ n is string }} {{ l is mapping }} {{ d is sequence }} {{ n is iterable }}",
    "{{ x is eq 5 }} {{ x is equalto(5) }} {{ x is ne 5 }} {{ x is lt 6 }} {{ x is gt 6 }} "
    "{{ x is ge 5 }} {{ x is le 4 }} {{ 'a' is in 'cat' }} {{ s is lower }} {{ 'abc' is lower }} "
    "{{ 'ABC' is upper }} {{ x is not none }} {{ n is sameas none }}",
    # Filters.
    "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|length }} {{ l|count }} {{ d|length }} "
    "{{ u|length }} {{ y|length }} {{ ' \\u3000x\\n'|trim }}",
    "{{ d|tojson }} {{ l|tojson }} {{ u|tojson }} {{ nested|tojson }} {{ nested|tojson(indent=2) }} "
    "{{ f|tojson }} {{ n|tojson }} {{ 'a\"b\\\\c\\n\\t\\x01\\x7f'|tojson }} "
    "{{ nested|tojson(sort_keys=true) }} {{ nested|tojson(separators=(',', ':')) }} "
    "{{ u|tojson(ensure_ascii=true) }} {{ [] | tojson(indent=2) }} {{ {} | tojson(indent=2) }} "
    "{{ (1, 2)|tojson }} {{ {1: 'a', none: 2, true: 3, 1.5: 4}|tojson }} {{ nested|tojson(indent='\\t') }}",
    "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}{% for k, v in d.items() %}{{ k }}:{{ v }};"
    "{% endfor %}{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('zz') }} "
    "{{ d.get('zz', 7) }} {{ y|items|list }}",
    "{{ x|string ~ '!' }} {{ '42'|int + 1 }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(9) }} "
    "{{ f|int }} {{ '3.25'|float }} {{ x|float }} {{ 'abc'|float }} {{ ' -12 '|int }} {{ n|int }} "
    "{{ '1e3'|float }} {{ t|int }} {{ '-4.9'|int }}",
    "{{ s|lower }} {{ s|upper }} {{ 'hELLO wORLD'|capitalize }} {{ 'the quick-brown (fox)'|title }} "
    "{{ n|lower }} {{ x|upper }}",
    "{{ l|first }} {{ l|last }} {{ s|first }} {{ s|last }} {{ []|first }}|{{ l|join(', ') }} "
    "{{ l|join }} {{ messages|join('|', attribute='role') }} {{ d|first }} {{ d|last }}",
    "{{ y|default('dflt') }} {{ ''|default('e') }} {{ ''|default('e', true) }} {{ n|default('nn') }} "
    "{{ y|d('short') }} {{ y|default }}|{{ x|default(1) }}",
    "{{ s|replace('o', '0') }} {{ s|replace('o', '0', 1) }} {{ 'ab'|replace('', '-') }} "
    "{{ 'aaa'|replace('a', 'bb') }} {{ x|replace('5', 'five') }}",
    "{{ s|list }} {{ d|list }} {{ y|list }} {{ l|sort }} {{ l|sort(reverse=true) }} "
    "{{ ['b', 'A', 'a', 'C']|sort }} {{ ['b', 'A', 'a', 'C']|sort(case_sensitive=true) }} "
    "{{ messages|sort(attribute='role')|map(attribute='role')|join(',') }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} "
    "{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }} "
    "{{ messages|selectattr('role', '==', 'assistant')|list|length }} "
    "{{ messages|selectattr('tool_calls', 'defined')|list }} {{ messages|selectattr('content')|list|length }}",
    "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ l|select('gt', 1)|list }} "
    "{{ [0, 1, '', 'a', none]|select|list }} {{ l|map('string')|join('-') }} "
    "{{ ['a','b']|map('upper')|list }} {{ messages|map(attribute='nope', default='?')|list }} "
    "{{ [[1, 2], [3]]|map('length')|list }} {{ [' a ', 'b ']|map('trim')|list }}",
    "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A', 'b']|unique(case_sensitive=true)|list }} "
    "{{ l|max }} {{ l|min }} {{ l|sum }} {{ messages|map(attribute='content')|map('length')|sum }} "
    "{{ [1.5, 2]|sum }} {{ ['b', 'A']|max }} {{ []|max }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|"
    "{{ 'a\\nb\\n\\nc'|indent('> ', blank=true) }}|{{ 'a\\r\\nb'|indent(1) }}|{{ ''|indent }}",
    "{{ d|dictsort }} {{ {'b': 2, 'a': 1, 'c': 0}|dictsort(by='value') }} {{ d|dictsort(reverse=true) }} {{ s|reverse }} "
    "{{ l|reverse|list }} {{ -3|abs }} {{ (-3)|abs }} {{ s|wordcount }} {{ '<a href=\"x\">&\\''|e }} "
    "{{ 'x'|safe }} {{ u|reverse }} {{ -1.5|abs }}",
    # Methods.
    "{{ s.startswith('He') }} {{ s.endswith('ld') }} {{ s.startswith(('x', 'H')) }} "
    "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a '.lstrip() }}|{{ ' a  '.rstrip() }}|"
    "{{ '\\n\\na\\n'.strip('\\n') }}|{{ 'éaé'.strip('é') }}|{{ 'abc'.strip(none) }}",
    "{{ 'a,b,,c'.split(',') }} {{ '  a  b\\tc\\n'.split() }} {{ 'a b c'.split(' ', 1) }} "
    "{{ 'a,b,c'.rsplit(',', 1) }} {{ '  a  b  c  '.split(none, 1) }} "
    "{{ '  a  b  c  '.rsplit(none, 1) }} {{ 'x'.split('x') }} {{ ''.split() }} {{ ''.split(',') }} "
    "{{ 'a<think>b</think>c'.split('</think>')[0].split('<think>')[-1] }} {{ 'aXbXc'.rsplit('X') }} "
    "{{ 'a b  '.split(none, 1) }} {{ '  a b'.rsplit(none, 1) }} {{ ' a b '.split(none, 0) }} "
    "{{ ' a b '.rsplit(none, 0) }} {{ 'aaa'.split('aa') }} {{ 'aaa'.rsplit('aa') }} "
    "{{ 'é中x中'.rsplit('中', 1) }} {{ 'a\u3000b'.split() }}",
    "{{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ \"they're bill's\".title() }} "
    "{{ 'hELLO'.capitalize() }} {{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} "
    "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ u.find('w') }} {{ s.count('l') }} "
    "{{ '-'.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ '123'.isdigit() }} "
    "{{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'AB'.isupper() }} "
    "{{ 'a1'.isalnum() }} {{ ''.isdigit() }}",
    "{{ l.index(1) }} {{ l.count(3) }} {{ [1, 1].count(1) }} {{ d.copy() }} {{ l.copy() }}",
    # Loops.
    "{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
    "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a', 'b') }}{{ loop.previtem }}"
    "{{ loop.nextitem }}{{ loop.depth }}|{% endfor %}",
    "{% for i in l if i > 1 %}{{ i }}/{{ loop.length }}{% else %}none{% endfor %}"
    "{% for i in [] %}x{% else %}empty{% endfor %}{% for i in y %}x{% else %}undef{% endfor %}"
    "{% for i in l if i > 10 %}x{% else %}filtered{% endfor %}",
    "{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}{% for (a, b) in d.items() %}{{ a }}"
    "{{ b }}{% endfor %}{% for c in 'héllo' %}{{ c }}.{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
    "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}"
    "{% endif %}{{ i }}{% endfor %}|{{ range(5)|list }} {{ range(2, 5)|list }} "
    "{{ range(10, 0, -3)|list }} {{ range(0)|list }}",
    "{% for a in [1, 2] %}{% set outer = loop %}{% for b in [3, 4] %}{{ outer.index }}{{ loop.index }}"
    "{% endfor %}{% endfor %}",
    "{% for i in [1, 2, 3] %}{% for j in [1, 2, 3] %}{% if j == 2 %}{% break %}{% endif %}{{ i }}{{ j }}"
    "{% endfor %}{% endfor %}",
    # Scopes, namespaces, set.
    "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }},{% endfor %}{{ x }}",
    "{% if true %}{% set z = 3 %}{% endif %}{{ z }}{% for i in [1] %}{% set w = 1 %}{% endfor %}{{ w }}",
    "{% set ns = namespace(count=0, items=[]) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}"
    "{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.count }} {{ ns.items }}",
    "{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }} {{ ns.b }}|"
    "{% set ns2 = namespace({'k': 2}, j=3) %}{{ ns2.k }}{{ ns2.j }} {{ ns2 }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}{% set (e, g) = 'xy' %}{{ e }}{{ g }}",
    "{% set block %}  inner {{ x }}\n{% endset %}[{{ block }}]",
    "{% set messages = messages[1:] %}{{ messages|length }}",
    # Macros.
    "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}"
    "{{ greet('A') }} {{ greet('B', 'Hi') }} {{ greet(greeting='Yo', name='C') }} {{ greet() }}|",
    "{% macro m(a) %}{{ a }}{{ x }}{% set x = 9 %}{{ x }}{% endmacro %}{{ m(1) }}{{ x }}",
    "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% macro m() %}\n  line\n{% endmacro %}[{{ m() }}]",
    "{% macro m(a, b=a * 2) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 5) }}",
    # Globals and the variables transformers passes.
    "{{ strftime_now('%Y-%m-%d %H:%M:%S %d %b %Y %A %j') }}|{{ strftime_now('') }}",
    "{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}{{ documents }}",
    "{{ dict(a=1, b='x') }} {{ namespace(a=1) }} {{ dict({'z': 1}, y=2) }}",
    # Generation blocks.
    "a{% generation %}b{{ x }}{% endgeneration %}c{% generation %}{% endgeneration %}d",
    "{% for m in messages %}{{ m.role }}:{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
    "{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}",
    "{% macro m() %}x{% generation %}yy{% endgeneration %}{% endmacro %}pre{{ m() }}post",
    "é{% generation %}中文{% endgeneration %}😀{% generation %}ü{% endgeneration %}",
    "{% generation %}{% set q = 1 %}{{ q }}{% endgeneration %}[{{ q }}]",
    "{% for i in l %}{% generation %}{{ loop.index }}{% endgeneration %}{% endfor %}",
    "{%- generation -%}\n  x  \n{%- endgeneration -%}\n y",
    "{% set s %}{% generation %}in{% endgeneration %}{% endset %}<{{ s }}>",
    # Refusals: the reference fails; Tessel must too.
    "{{ y + 1 }}",
    "{{ y.attr }}",
    "{{ y['k'] }}",
    "{{ y() }}",
    "{{ 1 / 0 }}",
    "{{ 1 // 0 }}",
    "{{ 1 % 0 }}",
    "{{ 'a' + 1 }}",
    "{{ raise_exception('custom message é') }}",
    "{{ messages.append(1) }}",
    "{{ d.update({}) }}",
    "{{ 1 < 'a' }}",
    "{{ (n.x).y }}",
    "{{ range(200000)|length }}",
    "{% set q = 5 %}{% set q.a = 1 %}",
    "{% for a, b in [1] %}{% endfor %}",
    "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "{{ {[1]: 2} }}",
    "{{ y|int }}",
    "{{ 5|length }}",
    "{{ 'x'|items|list }}",
    "{{ x() }}",
    "{{ none|join }}",
    "{{ x|tojson(indent=2) ~ y|tojson }}",
    "{{ -y }}",
    "{% if %}{% endif %}",
    "{% for %}",
    "{{ }}",
    "{% endif %}",
    "{% if x %}",
    "{{ x|nofilter }}",
    "{{ x is nottest }}",
    "{% for x in l %}{% endif %}",
    "{{ 'unclosed }}",
    "{{ x ) }}",
    "{% break %}",
    "{% macro m() %}{% break %}{% endmacro %}",
    "{{ x",
    "{# unclosed comment",
    "{% set %}",
    "{{ 1 +* 2 }}",
    "{{ '\\x4' }}",
    "{{ a b }}",
    "{% macro m(a=1, b) %}{% endmacro %}",
]


def case(template, messages, agp, bos, eos, variables):
    return {"template": template, "messages": messages, "add_generation_prompt": agp,
            "bos_token": bos, "eos_token": eos,
            "variables": json.dumps(variables, ensure_ascii=False) if variables else "",
            "now": NOW}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--templates", required=True)
    parser.add_argument("--show-refusals", action="store_true",
                        help="print both sides' reasons where both refuse")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)

    templates = {}
    for name in sorted(os.listdir(args.templates)):
        if name.endswith(".jinja"):
            with open(os.path.join(args.templates, name), encoding="utf-8") as f:
                templates[name[:-len(".jinja")]] = f.read()
    builtins = subprocess.run([args.tool, "--list"], check=True, capture_output=True,
                              text=True).stdout.split()
    for name in builtins:
        templates["builtin:" + name] = subprocess.run(
            [args.tool, "--builtin", name], check=True, capture_output=True, text=True).stdout

    labels, cases = [], []
    for tname, source in templates.items():
        for cname, messages in CONVERSATIONS.items():
            for vname, (bos, eos, variables) in VARIANTS.items():
                for agp in (False, True):
                    labels.append(("template", tname, cname, vname, agp))
                    cases.append(case(source, messages, agp, bos, eos, variables))
    for i, source in enumerate(SNIPPETS):
        labels.append(("snippet", i, source))
        cases.append(case(source, CONVERSATIONS["system"], True, "<s>", "</s>", SNIPPET_VARIABLES))

    path = os.path.join(args.work, "cases.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    run = subprocess.run([args.tool, path], capture_output=True)
    if run.returncode:
        print("MISMATCH: %s exited with %d: %s" % (args.tool, run.returncode,
                                                   run.stderr.decode(errors="replace")))
        return 1
    results = [json.loads(line) for line in run.stdout.decode("utf-8").split("\n") if line]
    if len(results) != len(cases):
        print("MISMATCH: %d results for %d cases" % (len(results), len(cases)))
        return 1

    mismatches = 0
    counts = {"template": [0, 0], "snippet": [0, 0]}  # [rendered, refused by both]
    generation_blocks = 0
    for label, c, ours in zip(labels, cases, results):
        ok, text, generation = reference(c)
        kind = label[0]
        problem = None
        if ok and not ours["ok"]:
            problem = "the reference renders %r; Tessel fails: %s" % (text[:300], ours["error"])
        elif not ok and ours["ok"]:
            problem = "the reference fails (%s); Tessel renders %r" % (text, ours["text"][:300])
        elif not ok:
            if args.show_refusals:
                print("refused %s\n  reference: %s\n  tessel:    %s" % (
                    " ".join(map(str, label[:5]))[:150], text[:200], ours["error"][:200]))
            if text.startswith("the template raised: ") and not ours["error"].endswith(text):
                problem = "the template raised %r; Tessel says %r" % (text, ours["error"])
            counts[kind][1] += 1
        elif ours["text"] != text:
            at = next((i for i, (a, b) in enumerate(zip(text, ours["text"])) if a != b),
                      min(len(text), len(ours["text"])))
            problem = "text differs at character %d:\n  reference %r\n  tessel    %r" % (
                at, text[max(0, at - 60):at + 60], ours["text"][max(0, at - 60):at + 60])
        elif ours["generation"] != generation:
            problem = "generation ranges differ: reference %s, tessel %s" % (
                generation, ours["generation"])
        else:
            counts[kind][0] += 1
            generation_blocks += len(generation)
        if problem:
            mismatches += 1
            print("MISMATCH %s: %s" % (" ".join(map(str, label[:5])), problem))

    print("templates: %d (%d built in: %s), conversations: %d, variants: %d" % (
        len(templates), len(builtins), ", ".join(builtins), len(CONVERSATIONS), len(VARIANTS)))
    print("template renders: %d identical, %d refused by both" % tuple(counts["template"]))
    print("snippets: %d identical, %d refused by both" % tuple(counts["snippet"]))
    print("generation blocks compared: %d" % generation_blocks)
    print("compared with jinja2 %s" % jinja2.__version__)
    print("parity: " + ("identical" if mismatches == 0 else "%d mismatches" % mismatches))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
