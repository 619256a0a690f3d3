//===- KvDecode.h - Generation over a paged KV cache ------------*- C++ -*-===//
//
// Runs a plan's decode programs (planfile::Plan::decoder): each sequence's prompt through
// `prefill`, a chunk at a time, then one token per step for every sequence being generated,
// through the smallest `decode_b<B>` that holds them all. The caches are pools of blocks;
// a sequence takes blocks as it grows (its block table lists them) and gives them back when it
// ends, so the cache holds the tokens of the sequences being generated, not a batch times the
// whole context. A sequence waits for a free row and blocks enough for its prompt.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_HOST_KVDECODE_H
#define TESSEL_RUNTIME_HOST_KVDECODE_H

#include "common/plan/PlanFile.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt {

class Ranks;

/// How the next token is drawn from the logits (TextCodec.h's sampleToken).
struct Sampling {
  double temperature = 0.8;
  int64_t topK = 40;
  double topP = 1.0;
  uint64_t seed = 0;
};

/// One sequence to continue.
struct DecodeRequest {
  std::vector<int32_t> prompt;
  int64_t maxNewTokens = 0;
};

/// What generation did, for the closing line and benchmarks.
struct DecodeStats {
  int64_t promptTokens = 0, newTokens = 0, prefillCalls = 0, decodeSteps = 0;
  double prefillSeconds = 0, decodeSeconds = 0;
  double firstTokenSeconds = -1; ///< From the start to the first sequence's first token.
  int64_t peakBlocks = 0;        ///< The most cache blocks held at once.
  int64_t contextShifts = 0;     ///< Sequences that outgrew the context and went on from its half.
};

/// The shapes the decode programs were compiled for.
struct DecodeGeometry {
  int64_t prefill = 0;     ///< New tokens per prefill call.
  /// Rows of the prefill's logits: 1 where it computes its last token's only (the chunk's
  /// last row), else one per row of the chunk.
  int64_t prefillLogitsRows = 0;
  int64_t block = 0;       ///< Positions per cache block.
  int64_t tableBlocks = 0; ///< Block-table entries per sequence.
  int64_t cacheBlocks = 0; ///< Blocks in each cache.
  int64_t vocab = 0;
  int64_t seq = 0;         ///< The model's context: positions 0 .. seq - 1.
  std::vector<int64_t> batches; ///< The decode programs' batch sizes, ascending.
  uint64_t cacheBytesPerToken = 0; ///< Every cache's bytes for one position, on every rank.

  /// Reads them from a decode plan; false with the reason when it lacks a program or a port.
  static bool of(const planfile::Plan &decoder, DecodeGeometry &g, std::string &error);
  /// The most positions a sequence holds: the model's, or fewer if its block table is short.
  int64_t context() const { return std::min(seq, tableBlocks * block); }
};

class KvDecoder {
public:
  /// `ranks` runs the decode plan, its weights loaded.
  static std::unique_ptr<KvDecoder> create(Ranks &ranks, std::string &error);

  const DecodeGeometry &geometry() const { return g_; }

  /// Continues every request, at most `batch` (clamped to the largest decode program) at a
  /// time, in order of admission. `ends(token)`: whether the token ends its sequence (it is not
  /// emitted); `emit(i, token)` receives request i's tokens as they are drawn. A sequence ends
  /// at an ending token or after its maxNewTokens; one that outgrows the model's context goes on
  /// from the last half of it.
  bool run(const std::vector<DecodeRequest> &requests, int64_t batch, const Sampling &sampling,
           const std::function<bool(int32_t)> &ends,
           const std::function<void(size_t, int32_t)> &emit, std::string &error);

  const DecodeStats &stats() const { return stats_; }

private:
  KvDecoder(Ranks &ranks, DecodeGeometry g) : ranks_(ranks), g_(std::move(g)) {}

  Ranks &ranks_;
  DecodeGeometry g_;
  DecodeStats stats_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_HOST_KVDECODE_H
