//===- HfTokenizer.cpp - A Hugging Face tokenizer.json pipeline -----------===//

#include "common/tokenizer/HfTokenizer.h"

#include "common/tokenizer/ByteLevel.h"
#include "common/tokenizer/Normalization.h"
#include "common/tokenizer/Utf8.h"

namespace tessel::tok {

bool Pattern::find(std::string_view text, size_t from, size_t &start, size_t &stop,
                   RegexScratch &scratch) const {
  if (isRegex)
    return regex.find(text, from, start, stop, scratch);
  if (literal.empty() || from >= text.size())
    return false;
  size_t at = text.find(literal, from);
  if (at == std::string_view::npos)
    return false;
  start = at;
  stop = at + literal.size();
  return true;
}

std::unique_ptr<EncodeScratch> HfTokenizer::acquire() const {
  {
    std::lock_guard<std::mutex> lock(poolMutex_);
    if (!pool_.empty()) {
      std::unique_ptr<EncodeScratch> scratch = std::move(pool_.back());
      pool_.pop_back();
      return scratch;
    }
  }
  return std::make_unique<EncodeScratch>();
}

void HfTokenizer::release(std::unique_ptr<EncodeScratch> scratch) const {
  std::lock_guard<std::mutex> lock(poolMutex_);
  pool_.push_back(std::move(scratch));
}

namespace {

using Piece = EncodeScratch::Piece;
using Mark = EncodeScratch::Mark;

std::string_view viewOf(const Piece &p, std::string_view text, const EncodeScratch &s) {
  std::string_view whole = p.buffer < 0 ? text : std::string_view(s.buffers[p.buffer]);
  return whole.substr(p.begin, p.end - p.begin);
}

/// A cleared buffer of the scratch's, by index (buffers may move as more are made).
int32_t newBuffer(EncodeScratch &s) {
  if (s.buffersUsed == s.buffers.size())
    s.buffers.emplace_back();
  s.buffers[s.buffersUsed].clear();
  return static_cast<int32_t>(s.buffersUsed++);
}

/// The pieces `marks` (the matches and the text between them, covering `p`) make under
/// `behavior`, appended to `out`; empty pieces are dropped.
void applyBehavior(const Piece &p, const std::vector<Mark> &marks, SplitBehavior behavior,
                   std::vector<Piece> &out) {
  auto push = [&](size_t begin, size_t end) {
    if (end > begin)
      out.push_back({p.buffer, static_cast<uint32_t>(p.begin + begin),
                     static_cast<uint32_t>(p.begin + end), p.atStart && begin == 0});
  };
  switch (behavior) {
  case SplitBehavior::Isolated:
    for (const Mark &m : marks)
      push(m.begin, m.end);
    return;
  case SplitBehavior::Removed:
    for (const Mark &m : marks)
      if (!m.match)
        push(m.begin, m.end);
    return;
  default:
    break;
  }
  // The merging behaviours, as folds over the marks (the reference's order).
  thread_local std::vector<std::pair<size_t, size_t>> merged;
  merged.clear();
  bool previousMatch = false;
  if (behavior == SplitBehavior::MergedWithNext) {
    for (size_t i = marks.size(); i-- > 0;) {
      const Mark &m = marks[i];
      if (m.match && !previousMatch && !merged.empty())
        merged.back().first = m.begin;
      else
        merged.push_back({m.begin, m.end});
      previousMatch = m.match;
    }
    for (size_t i = merged.size(); i-- > 0;)
      push(merged[i].first, merged[i].second);
    return;
  }
  for (const Mark &m : marks) {
    bool extend = behavior == SplitBehavior::MergedWithPrevious ? m.match && !previousMatch
                                                                : m.match == previousMatch;
    if (extend && !merged.empty())
      merged.back().second = m.end;
    else
      merged.push_back({m.begin, m.end});
    previousMatch = m.match;
  }
  for (const auto &[begin, end] : merged)
    push(begin, end);
}

/// The matches of `pattern` in `text` and the runs between them, in order.
void findMarks(std::string_view text, const Pattern &pattern, bool invert, EncodeScratch &s) {
  s.marks.clear();
  size_t done = 0, start = 0, stop = 0;
  while (done < text.size() && pattern.find(text, done, start, stop, s.regex)) {
    if (start > done)
      s.marks.push_back({done, start, invert});
    s.marks.push_back({start, stop, !invert});
    done = stop;
  }
  if (done < text.size())
    s.marks.push_back({done, text.size(), invert});
}

} // namespace

void HfTokenizer::normalize(std::string_view text, EncodeScratch &s) const {
  std::string &out = s.normalized;
  out.assign(text);
  std::string &next = s.normalizedNext;
  for (const NormalizerStep &step : normalizers_) {
    switch (step.kind) {
    case NormalizerStep::Kind::Prepend:
      if (!out.empty())
        out.insert(0, step.text);
      break;
    case NormalizerStep::Kind::Replace: {
      next.clear();
      size_t done = 0, start = 0, stop = 0;
      while (done < out.size() && step.pattern.find(out, done, start, stop, s.regex)) {
        next.append(out, done, start - done);
        next += step.text;
        done = stop;
      }
      next.append(out, done, std::string::npos);
      out.swap(next);
      break;
    }
    case NormalizerStep::Kind::Strip: {
      size_t begin = 0, end = out.size(), length = 0;
      if (step.left)
        while (begin < end && isUnicodeWhiteSpace(decodeUtf8(out, begin, length)))
          begin += length;
      if (step.right) {
        while (end > begin) {
          size_t charStart = end - 1;
          while (charStart > begin && (static_cast<unsigned char>(out[charStart]) & 0xC0) == 0x80)
            --charStart;
          if (!isUnicodeWhiteSpace(decodeUtf8(out, charStart, length)))
            break;
          end = charStart;
        }
      }
      out = out.substr(begin, end - begin);
      break;
    }
    case NormalizerStep::Kind::Nfc:
      next.clear();
      appendNfc(out, next);
      out.swap(next);
      break;
    }
  }
}

void HfTokenizer::preTokenizeAndEncode(std::string_view text, bool atStart, EncodeScratch &s,
                                       std::vector<uint32_t> &ids) const {
  if (text.empty())
    return;
  if (preTokenizers_.empty()) {
    model_.encodeWord(text, s.bpe, ids);
    return;
  }
  s.buffersUsed = 0;
  s.pieces.clear();
  s.pieces.push_back({-1, 0, static_cast<uint32_t>(text.size()), atStart});
  for (const PreTokenizerStep &step : preTokenizers_) {
    s.nextPieces.clear();
    for (size_t i = 0; i < s.pieces.size(); ++i) {
      Piece p = s.pieces[i];
      switch (step.kind) {
      case PreTokenizerStep::Kind::ByteLevel: {
        if (step.addPrefixSpace && viewOf(p, text, s)[0] != ' ') {
          int32_t buffer = newBuffer(s);
          std::string &spaced = s.buffers[buffer];
          spaced = ' ';
          spaced += viewOf(p, text, s);
          p = {buffer, 0, static_cast<uint32_t>(spaced.size()), p.atStart};
        }
        if (!step.useRegex) {
          s.nextPieces.push_back(p);
          break;
        }
        findMarks(viewOf(p, text, s), step.pattern, false, s);
        applyBehavior(p, s.marks, SplitBehavior::Isolated, s.nextPieces);
        break;
      }
      case PreTokenizerStep::Kind::Split:
        findMarks(viewOf(p, text, s), step.pattern, step.invert, s);
        applyBehavior(p, s.marks, step.behavior, s.nextPieces);
        break;
      case PreTokenizerStep::Kind::Metaspace: {
        int32_t buffer = newBuffer(s);
        std::string &replaced = s.buffers[buffer];
        const std::string &mark = step.replacement;
        for (char c : viewOf(p, text, s)) {
          if (c == ' ')
            replaced += mark;
          else
            replaced += c;
        }
        bool startsWithMark = replaced.compare(0, mark.size(), mark) == 0;
        if (!startsWithMark && (step.scheme == PrependScheme::Always ||
                                (step.scheme == PrependScheme::First && p.atStart)))
          replaced.insert(0, mark);
        Piece whole{buffer, 0, static_cast<uint32_t>(replaced.size()), p.atStart};
        if (!step.split) {
          s.nextPieces.push_back(whole);
          break;
        }
        s.marks.clear();
        size_t done = 0;
        for (size_t at; (at = replaced.find(mark, done)) != std::string::npos;
             done = at + mark.size()) {
          if (at > done)
            s.marks.push_back({done, at, false});
          s.marks.push_back({at, at + mark.size(), true});
        }
        if (done < replaced.size())
          s.marks.push_back({done, replaced.size(), false});
        applyBehavior(whole, s.marks, SplitBehavior::MergedWithNext, s.nextPieces);
        break;
      }
      }
    }
    s.pieces.swap(s.nextPieces);
  }
  for (const Piece &p : s.pieces)
    model_.encodeWord(viewOf(p, text, s), s.bpe, ids);
}

void HfTokenizer::encodeRun(std::string_view text, bool atStart, EncodeScratch &s,
                            std::vector<uint32_t> &ids) const {
  std::string_view normalized = text;
  if (!normalizers_.empty()) {
    normalize(text, s);
    normalized = s.normalized;
  }
  if (normalizedMatcher_.empty()) {
    preTokenizeAndEncode(normalized, atStart, s, ids);
    return;
  }
  s.normalizedParts.clear();
  splitOnAddedTokens(normalized, normalizedMatcher_, normalizedTokens_, added_, wordClass_, s.regex,
                     s.normalizedParts);
  for (const TextPart &part : s.normalizedParts) {
    if (part.token != TextPart::kText)
      ids.push_back(part.token);
    else
      preTokenizeAndEncode(normalized.substr(part.begin, part.end - part.begin),
                           atStart && part.begin == 0, s, ids);
  }
}

void HfTokenizer::encodeAppend(std::string_view text, bool addSpecialTokens,
                               std::vector<uint32_t> &ids) const {
  std::unique_ptr<EncodeScratch> s = acquire();
  std::string_view input = text;
  if (!isValidUtf8(text)) {
    s->repaired.clear();
    appendRepairedUtf8(text, s->repaired);
    input = s->repaired;
  }
  if (addSpecialTokens)
    ids.insert(ids.end(), prefix_.begin(), prefix_.end());
  if (rawMatcher_.empty()) {
    encodeRun(input, true, *s, ids);
  } else {
    s->parts.clear();
    splitOnAddedTokens(input, rawMatcher_, rawTokens_, added_, wordClass_, s->regex, s->parts);
    for (const TextPart &part : s->parts) {
      if (part.token != TextPart::kText)
        ids.push_back(part.token);
      else
        encodeRun(input.substr(part.begin, part.end - part.begin), part.begin == 0, *s, ids);
    }
  }
  if (addSpecialTokens)
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  release(std::move(s));
}

const std::string *HfTokenizer::decodedToken(uint32_t id) const {
  if (id < addedIndexOfId_.size() && addedIndexOfId_[id] >= 0) {
    const AddedToken &t = added_[addedIndexOfId_[id]];
    return t.normalized ? &t.normalizedContent : &t.content;
  }
  return model_.idToToken(id);
}

namespace {

void decodeByteLevel(std::vector<std::string> &tokens) {
  std::string bytes, all;
  for (const std::string &t : tokens) {
    if (byteLevelDecode(t, bytes))
      all += bytes;
    else
      all += t;
  }
  // The bytes of all the tokens together are text again, each invalid subpart U+FFFD.
  tokens.assign(1, repairUtf8(all));
}

bool byteFallbackValue(const std::string &t, uint8_t &value) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return false;
  auto hexDigit = [](char c) -> int {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  };
  int hi = hexDigit(t[3]), lo = hexDigit(t[4]);
  if (hi < 0 || lo < 0)
    return false;
  value = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

void decodeByteFallback(std::vector<std::string> &tokens) {
  std::vector<std::string> out;
  std::string bytes;
  auto flush = [&]() {
    if (bytes.empty())
      return;
    if (isValidUtf8(bytes))
      out.push_back(bytes);
    else
      for (size_t i = 0; i < bytes.size(); ++i)
        out.push_back("\xEF\xBF\xBD");
    bytes.clear();
  };
  for (std::string &t : tokens) {
    uint8_t value = 0;
    if (byteFallbackValue(t, value)) {
      bytes.push_back(static_cast<char>(value));
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  tokens.swap(out);
}

/// `t` without up to `start` leading and `stop` trailing copies of character `c`.
std::string strip(const std::string &t, std::string_view c, size_t start, size_t stop) {
  size_t begin = 0, end = t.size();
  for (size_t n = 0; n < start && t.compare(begin, c.size(), c) == 0 && begin < end; ++n)
    begin += c.size();
  for (size_t n = 0;
       n < stop && end >= begin + c.size() && t.compare(end - c.size(), c.size(), c) == 0; ++n)
    end -= c.size();
  return t.substr(begin, end - begin);
}

} // namespace

std::string HfTokenizer::decode(const std::vector<uint32_t> &ids, bool skipSpecialTokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (uint32_t id : ids) {
    const std::string *t = decodedToken(id);
    if (!t || (skipSpecialTokens && specialContents_.count(*t)))
      continue;
    tokens.push_back(*t);
  }
  std::string text;
  if (!hasDecoder_) {
    for (size_t i = 0; i < tokens.size(); ++i)
      text += (i ? " " : "") + tokens[i];
    return text;
  }
  std::unique_ptr<EncodeScratch> s;
  for (const DecoderStep &step : decoders_) {
    switch (step.kind) {
    case DecoderStep::Kind::ByteLevel:
      decodeByteLevel(tokens);
      break;
    case DecoderStep::Kind::ByteFallback:
      decodeByteFallback(tokens);
      break;
    case DecoderStep::Kind::Fuse: {
      std::string all;
      for (const std::string &t : tokens)
        all += t;
      tokens.assign(1, std::move(all));
      break;
    }
    case DecoderStep::Kind::Strip:
      for (std::string &t : tokens)
        t = strip(t, step.content, step.start, step.stop);
      break;
    case DecoderStep::Kind::Metaspace:
      for (size_t i = 0; i < tokens.size(); ++i) {
        const bool dropMark = i == 0 && step.scheme != PrependScheme::Never;
        std::string out;
        const std::string &t = tokens[i], &mark = step.replacement;
        for (size_t k = 0; k < t.size();) {
          if (t.compare(k, mark.size(), mark) == 0) {
            if (!dropMark)
              out += ' ';
            k += mark.size();
          } else {
            out += t[k++];
          }
        }
        tokens[i] = std::move(out);
      }
      break;
    case DecoderStep::Kind::Replace: {
      if (!s)
        s = acquire();
      for (std::string &t : tokens) {
        std::string out;
        size_t done = 0, start = 0, stop = 0;
        while (done < t.size() && step.pattern.find(t, done, start, stop, s->regex)) {
          out.append(t, done, start - done);
          out += step.content;
          done = stop;
        }
        out.append(t, done, std::string::npos);
        t = std::move(out);
      }
      break;
    }
    }
  }
  if (s)
    release(std::move(s));
  for (const std::string &t : tokens)
    text += t;
  return text;
}

std::optional<uint32_t> HfTokenizer::tokenToId(std::string_view token) const {
  for (const AddedToken &t : added_)
    if (t.content == token)
      return t.id;
  uint32_t id = model_.tokenToId(token);
  if (id == StringIdMap::kNone)
    return std::nullopt;
  return id;
}

std::optional<std::string> HfTokenizer::idToToken(uint32_t id) const {
  const std::string *t = decodedToken(id);
  if (!t)
    return std::nullopt;
  return *t;
}

} // namespace tessel::tok
