//===- Regex.cpp - The pre-tokenizers' regular expressions ----------------===//

#include "common/tokenizer/Regex.h"

#include "common/tokenizer/Utf8.h"

#ifdef TESSEL_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace tessel::tok {

namespace {

// Oniguruma's \s: Unicode's White_Space (PCRE2's \s also matches U+180E).
constexpr std::string_view kWhiteSpaceMembers =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";
// Letters assigned in Unicode 15.0 to 16.0 (CJK extensions H and I among them), which
// Oniguruma's \p{L} has and PCRE2 10.42's does not. Adding them to a class changes nothing
// where PCRE2's tables already hold them.
constexpr std::string_view kLettersSince14 =
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}"
    "\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}"
    "\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}"
    "\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}"
    "\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}"
    "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}";
// Numbers assigned in Unicode 15.0 to 16.0.
constexpr std::string_view kNumbersSince14 =
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}";

/// The class members that stand for escape `escape` (its text after the backslash, e.g.
/// "p{L}" or "s"), or empty when it is not one that is rewritten; `negated` says whether it
/// is the negated form (\S, \P{L}).
std::string membersFor(std::string_view escape, bool &negated) {
  negated = false;
  if (escape == "s" || escape == "S") {
    negated = escape == "S";
    return std::string(kWhiteSpaceMembers);
  }
  char kind = escape[0];
  if (kind != 'p' && kind != 'P')
    return "";
  std::string_view name = escape.substr(1);
  if (name.size() > 2 && name.front() == '{' && name.back() == '}')
    name = name.substr(1, name.size() - 2);
  if (name != "L" && name != "N")
    return "";
  negated = kind == 'P';
  std::string members = "\\p{" + std::string(name) + "}";
  members += name == "L" ? kLettersSince14 : kNumbersSince14;
  return members;
}

} // namespace

std::string rewriteOnigurumaPattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool inClass = false;
  size_t classStart = 0; // where the current class's members begin (after '[' or "[^")
  for (size_t i = 0; i < pattern.size();) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[i + 1];
      if (e == 'Q') { // \Q...\E is literal text
        size_t end = pattern.find("\\E", i + 2);
        size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      size_t length = 2;
      if ((e == 'p' || e == 'P') && i + 2 < pattern.size() && pattern[i + 2] == '{') {
        size_t close = pattern.find('}', i + 3);
        length = close == std::string_view::npos ? 2 : close + 1 - i;
      } else if (e == 'p' || e == 'P') {
        length = i + 2 < pattern.size() ? 3 : 2;
      }
      std::string_view escape = pattern.substr(i + 1, length - 1);
      bool negated = false;
      std::string members = escape.size() >= 1 ? membersFor(escape, negated) : "";
      if (!members.empty() && !inClass) {
        out += negated ? "[^" : "[";
        out += members;
        out += ']';
      } else if (!members.empty() && !negated) {
        out += members;
      } else {
        out.append(pattern.substr(i, length));
      }
      i += length;
      continue;
    }
    if (!inClass && c == '[') {
      inClass = true;
      out += c;
      ++i;
      if (i < pattern.size() && pattern[i] == '^') {
        out += '^';
        ++i;
      }
      classStart = out.size();
      continue;
    }
    if (inClass && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      size_t close = pattern.find(":]", i + 2);
      size_t stop = close == std::string_view::npos ? i + 1 : close + 2;
      out.append(pattern.substr(i, stop - i));
      i = stop;
      continue;
    }
    // A ']' first in a class is a member, not its end.
    if (inClass && c == ']' && out.size() != classStart)
      inClass = false;
    out += c;
    ++i;
  }
  return out;
}

#ifdef TESSEL_HAVE_PCRE2

bool regexAvailable() { return true; }

struct RegexScratch::State {
  pcre2_match_data *match = nullptr;
  pcre2_match_context *context = nullptr;
  pcre2_jit_stack *jitStack = nullptr;
};

RegexScratch::RegexScratch() : state_(std::make_unique<State>()) {
  state_->match = pcre2_match_data_create(1, nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  // PCRE2's default JIT stack is 32 KiB; long runs matched by patterns that backtrack need
  // more.
  state_->jitStack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  if (state_->context && state_->jitStack)
    pcre2_jit_stack_assign(state_->context, nullptr, state_->jitStack);
}

RegexScratch::~RegexScratch() {
  pcre2_jit_stack_free(state_->jitStack);
  pcre2_match_context_free(state_->context);
  pcre2_match_data_free(state_->match);
}

Regex::Regex() = default;
Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code *>(code_)); }
Regex::Regex(Regex &&other) noexcept : code_(other.code_) { other.code_ = nullptr; }
Regex &Regex::operator=(Regex &&other) noexcept {
  if (this != &other) {
    pcre2_code_free(static_cast<pcre2_code *>(code_));
    code_ = other.code_;
    other.code_ = nullptr;
  }
  return *this;
}

static bool compilePcre2(const std::string &pattern, void *&code, std::string &error) {
  int errorCode = 0;
  PCRE2_SIZE errorOffset = 0;
  pcre2_code *compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_UTF | PCRE2_UCP, &errorCode, &errorOffset, nullptr);
  if (!compiled) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(errorCode, message, sizeof(message));
    error = "the pattern does not compile (PCRE2, at offset " + std::to_string(errorOffset) +
            " of \"" + pattern + "\"): " + reinterpret_cast<const char *>(message);
    return false;
  }
  // Without JIT (a build of PCRE2 without it) the interpreter runs the same pattern.
  pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);
  code = compiled;
  return true;
}

bool Regex::compile(std::string_view pattern, std::string &error) {
  pcre2_code_free(static_cast<pcre2_code *>(code_));
  code_ = nullptr;
  if (!isValidUtf8(pattern)) {
    error = "the pattern is not valid UTF-8";
    return false;
  }
  return compilePcre2(rewriteOnigurumaPattern(pattern), code_, error);
}

/// One pcre2 match from `start`; the return code of PCRE2. A JIT resource failure is retried
/// by the interpreter, whose limits are larger.
static int matchAt(pcre2_code *code, std::string_view subject, size_t start, uint32_t options,
                   RegexScratch::State &state) {
  auto text = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(code, text, subject.size(), start, options | PCRE2_NO_UTF_CHECK, state.match,
                       state.context);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(code, text, subject.size(), start, options | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                     state.match, state.context);
  return rc;
}

bool Regex::find(std::string_view subject, size_t start, size_t &matchStart, size_t &matchEnd,
                 RegexScratch &scratch) const {
  auto *code = static_cast<pcre2_code *>(code_);
  RegexScratch::State &state = *scratch.state_;
  while (code && start < subject.size()) {
    int rc = matchAt(code, subject, start, 0, state);
    if (rc < 0)
      return false; // no match (or a match PCRE2 gave up on: the rest is unmatched text)
    PCRE2_SIZE *ovector = pcre2_get_ovector_pointer(state.match);
    if (ovector[1] > ovector[0]) {
      matchStart = ovector[0];
      matchEnd = ovector[1];
      return true;
    }
    // An empty match: look again from the next character.
    start = ovector[0] + utf8SequenceLength(static_cast<unsigned char>(subject[ovector[0]]));
  }
  return false;
}

bool Regex::matchesWhole(std::string_view subject, RegexScratch &scratch) const {
  auto *code = static_cast<pcre2_code *>(code_);
  if (!code)
    return false;
  int rc = matchAt(code, subject, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, *scratch.state_);
  return rc >= 0;
}

#else // no PCRE2

bool regexAvailable() { return false; }

struct RegexScratch::State {};
RegexScratch::RegexScratch() : state_(std::make_unique<State>()) {}
RegexScratch::~RegexScratch() = default;

Regex::Regex() = default;
Regex::~Regex() = default;
Regex::Regex(Regex &&other) noexcept : code_(other.code_) { other.code_ = nullptr; }
Regex &Regex::operator=(Regex &&other) noexcept {
  code_ = other.code_;
  other.code_ = nullptr;
  return *this;
}

static const char kNoPcre2[] =
    "Tessel was built without PCRE2, which regular-expression pre-tokenizers need (Debian: "
    "libpcre2-dev; rebuild after installing it)";

bool Regex::compile(std::string_view, std::string &error) {
  error = kNoPcre2;
  return false;
}
bool Regex::find(std::string_view, size_t, size_t &, size_t &, RegexScratch &) const {
  return false;
}
bool Regex::matchesWhole(std::string_view, RegexScratch &) const { return false; }

#endif

} // namespace tessel::tok
