//===- BuiltinChatTemplates.cpp - Chat templates built into Tessel --------===//
//
// Templates for the chat formats of widely used models, in the layout of the templates their
// tokenizers ship, for tokenizers that ship none. Each wraps the assistant's replies (with the
// token that ends them, so a model learns to stop) in `{% generation %}` blocks; the rest of
// the text is what the model reads. Content may be a string or a list of {"type": "text"}
// parts. test/Integration/Tokenizer/chat-template-parity.test renders every one with Python's Jinja2 as
// transformers does and compares.
//
//===----------------------------------------------------------------------===//

#include "common/tokenizer/ChatTemplate.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessel::tok {

namespace {

// ChatML (Qwen2 and 2.5 without tools, SmolLM, many fine-tunes).
const char *const kChatml = R"jinja({%- for message in messages %}
    {%- if message['content'] is string %}
        {%- set content = message['content'] %}
    {%- elif message['content'] is none %}
        {%- set content = '' %}
    {%- else %}
        {%- set content = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}
    {%- endif %}
    {{- '<|im_start|>' + message['role'] + '\n' }}
    {%- if message['role'] == 'assistant' %}
        {%- generation %}
            {{- content + '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- else %}
        {{- content + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)jinja";

// Gemma 2 and 3: no system role (a system message is folded into the first user turn), the
// assistant is "model".
const char *const kGemma = R"jinja({{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- if messages[0]['content'] is string %}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' %}
    {%- else %}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' %}
    {%- endif %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set first_user_prefix = '' %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'assistant' %}
        {%- set role = 'model' %}
    {%- else %}
        {%- set role = message['role'] %}
    {%- endif %}
    {%- if message['content'] is string %}
        {%- set content = message['content'] | trim %}
    {%- else %}
        {%- set content = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | map('trim') | join('') %}
    {%- endif %}
    {{- '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}
    {%- if role == 'model' %}
        {%- generation %}
            {{- content + '<end_of_turn>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- else %}
        {{- content + '<end_of_turn>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<start_of_turn>model\n' }}
{%- endif %}
)jinja";

// Llama 2 chat: the system prompt inside the first [INST] in <<SYS>> markers, BOS before each
// user turn, EOS after each reply.
const char *const kLlama2 = R"jinja({%- if messages[0]['role'] == 'system' %}
    {%- set loop_messages = messages[1:] %}
    {%- set system_message = messages[0]['content'] %}
{%- else %}
    {%- set loop_messages = messages %}
    {%- set system_message = false %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['content'] is string %}
        {%- set content = message['content'] %}
    {%- else %}
        {%- set content = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}
    {%- endif %}
    {%- if loop.index0 == 0 and system_message != false %}
        {%- set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + content %}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {{- bos_token + '[INST] ' + content.strip() + ' [/INST]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' }}
        {%- generation %}
            {{- content.strip() + ' ' + eos_token }}
        {%- endgeneration %}
    {%- endif %}
{%- endfor %}
)jinja";

// Llama 3 and 3.1 instruct without tools: a header per message, <|eot_id|> after each.
const char *const kLlama3 = R"jinja({{- bos_token }}
{%- for message in messages %}
    {%- if message['content'] is string %}
        {%- set content = message['content'] %}
    {%- else %}
        {%- set content = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}
    {%- if message['role'] == 'assistant' %}
        {%- generation %}
            {{- content | trim + '<|eot_id|>' }}
        {%- endgeneration %}
    {%- else %}
        {{- content | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)jinja";

// Mistral instruct (v0.3's layout): [INST] around user turns, a system message joined to the
// last user turn, EOS after each reply.
const char *const kMistral = R"jinja({%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['content'] is string %}
        {%- set content = message['content'] %}
    {%- else %}
        {%- set content = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.last and system_message is defined %}
            {{- '[INST] ' + system_message + '\n\n' + content + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + content + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' }}
        {%- generation %}
            {{- content + eos_token }}
        {%- endgeneration %}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
)jinja";

// Qwen3: ChatML with tools, and the reasoning of the replies after the last user query in
// <think> blocks (reasoning_content, or what the content holds before </think>); earlier
// replies keep their answers only. enable_thinking=false adds an empty think block to the
// generation prompt.
const char *const kQwen3 = R"jinja({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- elif message.content is none or message.content is undefined %}
        {%- set content = '' %}
    {%- else %}
        {%- set content = message.content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('') %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {{- '<|im_start|>' + message.role + '\n' }}
        {%- generation %}
            {%- if loop.index0 > ns.last_query_index %}
                {%- if loop.last or (not loop.last and reasoning_content) %}
                    {{- '<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
                {%- else %}
                    {{- content }}
                {%- endif %}
            {%- else %}
                {{- content }}
            {%- endif %}
            {%- if message.tool_calls %}
                {%- for tool_call in message.tool_calls %}
                    {%- if (loop.first and content) or (not loop.first) %}
                        {{- '\n' }}
                    {%- endif %}
                    {%- if tool_call.function %}
                        {%- set tool_call = tool_call.function %}
                    {%- endif %}
                    {{- '<tool_call>\n{"name": "' }}
                    {{- tool_call.name }}
                    {{- '", "arguments": ' }}
                    {%- if tool_call.arguments is string %}
                        {{- tool_call.arguments }}
                    {%- else %}
                        {{- tool_call.arguments | tojson }}
                    {%- endif %}
                    {{- '}\n</tool_call>' }}
                {%- endfor %}
            {%- endif %}
            {{- '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}
)jinja";

const std::pair<std::string_view, const char *> kBuiltins[] = {
    {"chatml", kChatml}, {"gemma", kGemma},     {"llama2", kLlama2},
    {"llama3", kLlama3}, {"mistral", kMistral}, {"qwen3", kQwen3},
};

} // namespace

const char *builtinChatTemplate(std::string_view name) {
  for (const auto &[n, source] : kBuiltins)
    if (n == name)
      return source;
  return nullptr;
}

std::string builtinChatTemplateNames() {
  std::vector<std::string_view> names;
  for (const auto &builtin : kBuiltins)
    names.push_back(builtin.first);
  std::sort(names.begin(), names.end());
  std::string text;
  for (std::string_view name : names)
    text += (text.empty() ? "" : ", ") + std::string(name);
  return text;
}

} // namespace tessel::tok
