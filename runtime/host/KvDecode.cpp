//===- KvDecode.cpp - Generation over a paged KV cache --------------------===//

#include "runtime/host/KvDecode.h"

#include "runtime/core/Blocks.h"
#include "runtime/core/Rng.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/TextCodec.h"
#include "runtime/support/HostClock.h"

#include <algorithm>
#include <deque>

namespace tessel::rt {

namespace {

const planfile::Port *findPort(const std::vector<planfile::Port> &ports, const std::string &name) {
  for (const planfile::Port &p : ports)
    if (p.name == name)
      return &p;
  return nullptr;
}

/// The whole shape of a port (its split dims multiplied back).
std::vector<int64_t> wholeShapeOf(const planfile::Plan &plan, const planfile::Port &p) {
  return blockOf(plan, p.shape, p.split, 0).whole;
}

/// The sampling stream of request `index`: request 0 draws what a one-prompt run draws.
Rng streamOf(uint64_t seed, size_t index) {
  if (index == 0)
    return Rng(seed);
  uint64_t key = seed + 0x9e3779b97f4a7c15ull * index;
  return Rng(Rng::splitmix64(key));
}

/// A sequence being generated.
struct Live {
  size_t request = 0;
  std::vector<int32_t> tokens; ///< The prompt and what was drawn so far.
  std::vector<int32_t> blocks; ///< Its cache blocks, in order of position.
  int64_t cached = 0;          ///< Positions whose keys and values the cache holds.
  int64_t drawn = 0;
  Rng rng;
  bool done = false;
};

} // namespace

bool DecodeGeometry::of(const planfile::Plan &decoder, DecodeGeometry &g, std::string &error) {
  g = DecodeGeometry();
  const planfile::Program *prefill = decoder.findProgram("prefill");
  if (!prefill) {
    error = "the decode plan has no 'prefill' program";
    return false;
  }
  for (const planfile::Program &p : decoder.programs) {
    const std::string digits = p.name.rfind("decode_b", 0) == 0 ? p.name.substr(8) : "";
    if (!digits.empty() && digits.size() < 10 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        std::stoll(digits) > 0)
      g.batches.push_back(std::stoll(digits));
  }
  std::sort(g.batches.begin(), g.batches.end());
  if (g.batches.empty()) {
    error = "the decode plan has no decode_b<B> program";
    return false;
  }
  const planfile::Port *tokens = findPort(prefill->inputs, "tokens");
  const planfile::Port *table = findPort(prefill->inputs, "block_table");
  const planfile::Port *logits = findPort(prefill->outputs, "logits");
  if (!tokens || !table || !logits || !findPort(prefill->inputs, "positions")) {
    error = "the decode plan's prefill lacks tokens, positions, block_table or logits";
    return false;
  }
  g.prefill = wholeShapeOf(decoder, *tokens).back();
  g.tableBlocks = wholeShapeOf(decoder, *table).back();
  const std::vector<int64_t> logitsShape = wholeShapeOf(decoder, *logits);
  g.vocab = logitsShape.back();
  g.prefillLogitsRows = logitsShape.size() == 3 ? logitsShape[1] : g.prefill;

  for (const planfile::StateTensor &t : decoder.state)
    if (t.role == "kv_cache" && t.shape.size() == 4) {
      g.cacheBlocks = t.shape[0];
      g.block = t.shape[1];
      g.cacheBytesPerToken += t.bytes() / static_cast<uint64_t>(t.shape[0] * t.shape[1]);
    }
  const planfile::Attr *seq = decoder.findConfig("dims.seq");
  if (!seq || !std::holds_alternative<int64_t>(seq->value) || std::get<int64_t>(seq->value) < 1 ||
      g.tableBlocks < 1) {
    error = "the decode plan names no context (dims.seq) or block table";
    return false;
  }
  g.seq = std::get<int64_t>(seq->value);
  // A model without attention keeps nothing between steps: any blocks will do.
  if (g.cacheBlocks == 0) {
    g.block = (g.seq + g.tableBlocks - 1) / g.tableBlocks;
    g.cacheBlocks = g.tableBlocks * g.batches.back();
  }
  return true;
}

std::unique_ptr<KvDecoder> KvDecoder::create(Ranks &ranks, std::string &error) {
  DecodeGeometry g;
  if (!DecodeGeometry::of(ranks.plan(), g, error))
    return nullptr;
  return std::unique_ptr<KvDecoder>(new KvDecoder(ranks, std::move(g)));
}

bool KvDecoder::run(const std::vector<DecodeRequest> &requests, int64_t batch,
                    const Sampling &sampling, const std::function<bool(int32_t)> &ends,
                    const std::function<void(size_t, int32_t)> &emit, std::string &error) {
  stats_ = DecodeStats();
  const double start = hostSeconds();
  const int64_t rows = std::clamp<int64_t>(batch, 1, g_.batches.back());
  const int64_t context = g_.context();
  for (size_t i = 0; i < requests.size(); ++i)
    if (requests[i].prompt.empty()) {
      error = "prompt " + std::to_string(i + 1) + " has no tokens";
      return false;
    }
  if ((context + g_.block - 1) / g_.block > g_.cacheBlocks) {
    error = "the KV cache's " + std::to_string(g_.cacheBlocks) + " blocks of " +
            std::to_string(g_.block) + " positions cannot hold one sequence of " +
            std::to_string(context);
    return false;
  }

  std::vector<int32_t> freeBlocks;
  for (int64_t b = g_.cacheBlocks - 1; b >= 0; --b)
    freeBlocks.push_back(static_cast<int32_t>(b));
  auto held = [&] { return g_.cacheBlocks - static_cast<int64_t>(freeBlocks.size()); };
  // Takes the blocks `s` needs to hold `positions` positions; false when the pool is short.
  auto grow = [&](Live &s, int64_t positions) {
    const size_t want = static_cast<size_t>((positions + g_.block - 1) / g_.block);
    if (want > static_cast<size_t>(g_.tableBlocks) ||
        want - std::min(want, s.blocks.size()) > freeBlocks.size())
      return false;
    while (s.blocks.size() < want) {
      s.blocks.push_back(freeBlocks.back());
      freeBlocks.pop_back();
    }
    stats_.peakBlocks = std::max(stats_.peakBlocks, held());
    return true;
  };
  auto release = [&](Live &s) {
    freeBlocks.insert(freeBlocks.end(), s.blocks.rbegin(), s.blocks.rend());
    s.blocks.clear();
  };

  std::vector<float> probs;
  // Draws the next token of `s` from `logits`; ends it as its request says.
  auto draw = [&](Live &s, const float *logits) {
    const int32_t next = sampleToken(logits, g_.vocab, sampling.temperature, sampling.topK,
                                     sampling.topP, s.rng, probs);
    if (stats_.firstTokenSeconds < 0)
      stats_.firstTokenSeconds = hostSeconds() - start;
    if (ends(next)) {
      s.done = true;
      return;
    }
    s.tokens.push_back(next);
    ++s.drawn;
    ++stats_.newTokens;
    emit(s.request, next);
    if (s.drawn >= requests[s.request].maxNewTokens)
      s.done = true;
  };

  const StepContext ctx{1, 0, sampling.seed};
  std::vector<int32_t> tokens, positions, table;
  // Fills row `r` of the block table with `s`'s blocks (the rest 0: never read).
  auto tableRow = [&](int64_t r, const Live *s) {
    std::fill(table.begin() + r * g_.tableBlocks, table.begin() + (r + 1) * g_.tableBlocks, 0);
    if (s)
      std::copy(s->blocks.begin(), s->blocks.end(), table.begin() + r * g_.tableBlocks);
  };
  auto runProgram = [&](const std::string &program) {
    return ranks_.writeInput(program, "tokens", tokens.data(),
                             static_cast<int64_t>(tokens.size()), error) &&
           ranks_.writeInput(program, "positions", positions.data(),
                             static_cast<int64_t>(positions.size()), error) &&
           ranks_.writeInput(program, "block_table", table.data(),
                             static_cast<int64_t>(table.size()), error) &&
           ranks_.run(program, ctx, error);
  };

  // The tokens of `s`, a chunk at a time, from position 0; the last chunk's last logits draw
  // the next token. A short last chunk takes the chunk's last rows (padding before it), so
  // that its last token is the chunk's last row, whose logits the prefill computes.
  auto prefill = [&](Live &s, bool prompt) {
    const double t0 = hostSeconds();
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    tokens.assign(static_cast<size_t>(g_.prefill), 0);
    positions.assign(static_cast<size_t>(g_.prefill), -1);
    table.assign(static_cast<size_t>(g_.tableBlocks), 0);
    tableRow(0, &s);
    for (int64_t from = 0; from < n; from += g_.prefill) {
      const int64_t count = std::min(g_.prefill, n - from), pad = g_.prefill - count;
      for (int64_t i = 0; i < g_.prefill; ++i) {
        tokens[i] = i < pad ? 0 : s.tokens[from + i - pad];
        positions[i] = i < pad ? -1 : static_cast<int32_t>(from + i - pad);
      }
      if (!runProgram("prefill"))
        return false;
      ++stats_.prefillCalls;
      if (from + count == n)
        draw(s, ranks_.output("prefill", "logits") + (g_.prefillLogitsRows - 1) * g_.vocab);
    }
    s.cached = n;
    // A context shift's prefill is part of decoding the sequence.
    (prompt ? stats_.prefillSeconds : stats_.decodeSeconds) += hostSeconds() - t0;
    return true;
  };
  // A sequence whose next token would stand past the model's context keeps its last half and
  // goes on from there, its kept tokens prefilled again at positions from 0 (the whole-window
  // recomputation of --no-kv-cache instead slides the window by one token each step).
  auto shift = [&](Live &s) {
    const int64_t keep = std::max<int64_t>(1, context / 2);
    s.tokens.erase(s.tokens.begin(), s.tokens.end() - keep);
    release(s);
    ++stats_.contextShifts;
    return grow(s, keep) && prefill(s, /*prompt=*/false);
  };

  std::deque<size_t> waiting;
  for (size_t i = 0; i < requests.size(); ++i)
    waiting.push_back(i);
  std::vector<Live> live;
  while (!waiting.empty() || !live.empty()) {
    // Admit waiting sequences while a row and blocks for the prompt (and the first drawn
    // token) are free.
    while (!waiting.empty() && static_cast<int64_t>(live.size()) < rows) {
      const size_t r = waiting.front();
      if (requests[r].maxNewTokens <= 0) {
        waiting.pop_front();
        continue;
      }
      Live s;
      s.request = r;
      // A prompt longer than the context is read as the window of its last tokens.
      const std::vector<int32_t> &prompt = requests[r].prompt;
      s.tokens.assign(prompt.end() - std::min<int64_t>(context, prompt.size()), prompt.end());
      s.rng = streamOf(sampling.seed, r);
      if (!grow(s, static_cast<int64_t>(s.tokens.size()))) {
        if (live.empty()) {
          error = "the KV cache's " + std::to_string(g_.cacheBlocks) +
                  " blocks cannot hold prompt " + std::to_string(r + 1);
          return false;
        }
        break; // It waits for a running sequence to give blocks back.
      }
      waiting.pop_front();
      stats_.promptTokens += static_cast<int64_t>(s.tokens.size());
      if (!prefill(s, /*prompt=*/true))
        return false;
      live.push_back(std::move(s));
    }
    for (Live &s : live)
      if (!s.done && static_cast<int64_t>(s.tokens.size()) > context && !shift(s)) {
        if (error.empty())
          error = "the KV cache has no free blocks to shift a full context into";
        return false;
      }
    for (Live &s : live)
      if (s.done)
        release(s);
    live.erase(std::remove_if(live.begin(), live.end(), [](const Live &s) { return s.done; }),
               live.end());
    if (live.empty())
      continue;

    // One decode step: every live sequence's last token, at its position, into the cache.
    // A sequence whose next position needs a block the pool lacks waits a step.
    std::vector<Live *> step;
    for (Live &s : live)
      if (grow(s, static_cast<int64_t>(s.tokens.size())))
        step.push_back(&s);
    if (step.empty()) {
      error = "the KV cache ran out of blocks with every sequence waiting for one";
      return false;
    }
    const int64_t programBatch =
        *std::lower_bound(g_.batches.begin(), g_.batches.end(), static_cast<int64_t>(step.size()));
    const std::string program = "decode_b" + std::to_string(programBatch);
    const double t0 = hostSeconds();
    tokens.assign(static_cast<size_t>(programBatch), 0);
    positions.assign(static_cast<size_t>(programBatch), -1);
    table.assign(static_cast<size_t>(programBatch * g_.tableBlocks), 0);
    for (int64_t r = 0; r < programBatch; ++r) {
      const Live *s = r < static_cast<int64_t>(step.size()) ? step[r] : nullptr;
      tableRow(r, s);
      if (s) {
        tokens[r] = s->tokens.back();
        positions[r] = static_cast<int32_t>(s->tokens.size() - 1);
      }
    }
    if (!runProgram(program))
      return false;
    ++stats_.decodeSteps;
    const float *logits = ranks_.output(program, "logits");
    for (size_t r = 0; r < step.size(); ++r) {
      step[r]->cached = static_cast<int64_t>(step[r]->tokens.size());
      draw(*step[r], logits + static_cast<int64_t>(r) * g_.vocab);
    }
    stats_.decodeSeconds += hostSeconds() - t0;
  }
  return true;
}

} // namespace tessel::rt
