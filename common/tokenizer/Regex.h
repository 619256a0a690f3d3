//===- Regex.h - The pre-tokenizers' regular expressions --------*- C++ -*-===//
//
// Pre-tokenizer patterns (GPT-2's, Llama 3's, Qwen2's) are written for Oniguruma, the engine
// Hugging Face's tokenizers uses. Tessel runs them on PCRE2 (8-bit, UTF and UCP, JIT-compiled)
// after rewriting the classes whose meaning differs between the two:
//
//   \s     Oniguruma: the 25 code points of Unicode's White_Space; PCRE2 adds U+180E
//   \p{L}  Oniguruma's tables are Unicode 16, PCRE2 10.42's Unicode 14: the letters and
//   \p{N}    numbers assigned since are added to the class
//
// (outside a character class \s, \S, \p{L}, \P{L}, \p{N}, \P{N} and their one-letter forms;
// inside one the positive forms). \w, \d and \b keep PCRE2's meaning. Nothing else differs in
// the patterns tokenizer files use.
//
// PCRE2 is optional at build time (TESSEL_HAVE_PCRE2): without it compile() fails saying so.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_TOKENIZER_REGEX_H
#define TESSEL_COMMON_TOKENIZER_REGEX_H

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace tessel::tok {

/// Whether this build has a regular-expression engine (PCRE2).
bool regexAvailable();

/// What one thread needs to run any Regex: PCRE2's match data and JIT stack. Not shared
/// between threads.
class RegexScratch {
public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch &) = delete;
  RegexScratch &operator=(const RegexScratch &) = delete;

  struct State; // PCRE2's objects, opaque here

private:
  friend class Regex;
  std::unique_ptr<State> state_;
};

/// A compiled pattern. Immutable once compiled, so one Regex serves every thread.
class Regex {
public:
  Regex();
  ~Regex();
  Regex(Regex &&) noexcept;
  Regex &operator=(Regex &&) noexcept;

  /// Compiles an Oniguruma-style pattern (rewritten as above). On failure returns false with
  /// the reason and the offset in the pattern.
  bool compile(std::string_view pattern, std::string &error);

  /// The first match in subject[start, end) of valid UTF-8 `subject` (start on a character
  /// boundary) as [matchStart, matchEnd). Empty matches are skipped, as the pre-tokenizers
  /// drop empty pieces.
  bool find(std::string_view subject, size_t start, size_t &matchStart, size_t &matchEnd,
            RegexScratch &scratch) const;

  /// Whether the whole of `subject` matches (anchored at both ends).
  bool matchesWhole(std::string_view subject, RegexScratch &scratch) const;

  bool compiled() const { return code_ != nullptr; }

private:
  void *code_ = nullptr;
};

/// The Oniguruma-to-PCRE2 rewrite above, exposed for tests.
std::string rewriteOnigurumaPattern(std::string_view pattern);

} // namespace tessel::tok

#endif // TESSEL_COMMON_TOKENIZER_REGEX_H
