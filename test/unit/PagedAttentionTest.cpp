//===- PagedAttentionTest.cpp - Attention over paged key/value caches -----===//
//
// cpu::pagedAttention against a plain reference (each token's positions gathered from the
// caches and the call's new tokens, dense attention over them in double), with the caches after
// the call: the new tokens' slots written, every other element kept. A prefill chunk then a
// decode token give cpu::attention's causal attention over the whole sequence. The device-neutral
// check refuses calls whose sizes do not hold, and the CPU device runs a call with 16-bit
// caches, widened and narrowed around the f32 kernel, keeping every slot the call does not
// write.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Device.h"
#include "runtime/device/KernelArgs.h"

#include "common/catalogue/KernelCatalogue.h"
#include "common/support/Float16.h"
#include "kernels/cpu/CpuKernels.h"
#include "test/unit/KernelShapes.h"
#include "test/unit/PagedScene.h"
#include "test/unit/PlanBuilders.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

using namespace tessel;

namespace {

using Floats = std::vector<float>;
using test::PagedScene;
using test::PagedSpec;

/// What a call must give: the output (zero rows for padding and skipped tokens) and the caches.
struct PagedResult {
  std::vector<double> out;
  Floats kCache, vCache;
};

/// The new token of sequence b at position `pos`, if the call has one: its slot.
int64_t freshSlot(const PagedScene &x, int64_t b, int64_t pos) {
  for (int64_t s = 0; s < x.args.seq; ++s)
    if (x.positions[b * x.args.seq + s] == pos)
      return s;
  return -1;
}

/// Whether token t's positions all lie in blocks its table row names.
bool reachable(const PagedScene &x, int64_t t) {
  const cpu::PagedAttentionArgs &a = x.args;
  const int64_t p = x.positions[t];
  if (p < 0 || p / a.blockSize >= a.maxBlocks)
    return false;
  const int64_t first = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
  for (int64_t i = first / a.blockSize; i <= p / a.blockSize; ++i) {
    const int32_t block = x.table[t / a.seq * a.maxBlocks + i];
    if (block < 0 || block >= a.blocks)
      return false;
  }
  return true;
}

/// Whether token t's own slot is one the kernel writes.
bool stored(const PagedScene &x, int64_t t) {
  const cpu::PagedAttentionArgs &a = x.args;
  const int64_t p = x.positions[t];
  if (p < 0 || p / a.blockSize >= a.maxBlocks)
    return false;
  const int32_t block = x.table[t / a.seq * a.maxBlocks + p / a.blockSize];
  return block >= 0 && block < a.blocks;
}

PagedResult reference(const PagedScene &x) {
  const cpu::PagedAttentionArgs &a = x.args;
  const int64_t H = a.heads, KH = a.kvHeads, D = a.head, S = a.seq, width = KH * D;
  PagedResult r;
  r.out.assign(x.q.size(), 0.0);
  r.kCache = x.kCache;
  r.vCache = x.vCache;
  for (int64_t t = 0; t < a.batch * S; ++t)
    if (stored(x, t)) {
      const int64_t at = test::cacheOffset(x, t / S, x.positions[t], 0);
      std::copy(x.k.begin() + t * width, x.k.begin() + (t + 1) * width, r.kCache.begin() + at);
      std::copy(x.v.begin() + t * width, x.v.begin() + (t + 1) * width, r.vCache.begin() + at);
    }
  for (int64_t t = 0; t < a.batch * S; ++t) {
    if (!reachable(x, t))
      continue;
    const int64_t b = t / S, p = x.positions[t];
    const int64_t first = a.window > 0 ? std::max<int64_t>(0, p - a.window + 1) : 0;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / (H / KH);
      // Position j's key and value: the call's new token's, else the cache's before the call.
      auto key = [&](int64_t j, int64_t d, bool value) -> double {
        const int64_t s = freshSlot(x, b, j);
        if (s >= 0)
          return (value ? x.v : x.k)[((b * S + s) * KH + kh) * D + d];
        return (value ? x.vCache : x.kCache)[test::cacheOffset(x, b, j, kh) + d];
      };
      std::vector<double> scores;
      double max = -INFINITY;
      for (int64_t j = first; j <= p; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += x.q[(t * H + h) * D + d] * key(j, d, false);
        scores.push_back(dot * a.scale);
        max = std::max(max, scores.back());
      }
      double sum = 0;
      for (double &s : scores)
        sum += (s = std::exp(s - max));
      for (int64_t j = first; j <= p; ++j)
        for (int64_t d = 0; d < D; ++d)
          r.out[(t * H + h) * D + d] += scores[j - first] / sum * key(j, d, true);
    }
  }
  return r;
}

/// Runs the CPU kernel on copies of the scene's caches.
PagedResult run(const PagedScene &x) {
  PagedResult r;
  Floats out(x.q.size(), NAN);
  r.kCache = x.kCache;
  r.vCache = x.vCache;
  cpu::pagedAttention(x.args, x.q.data(), x.k.data(), x.v.data(), x.positions.data(),
                      x.table.data(), out.data(), r.kCache.data(), r.vCache.data());
  r.out.assign(out.begin(), out.end());
  return r;
}

void expectMatches(const PagedResult &want, const PagedResult &got, const std::string &what) {
  ASSERT_EQ(want.out.size(), got.out.size());
  int bad = 0;
  for (size_t i = 0; i < want.out.size() && bad < 5; ++i)
    if (!(std::fabs(got.out[i] - want.out[i]) <= 2e-6 + 1e-5 * std::fabs(want.out[i]))) {
      ADD_FAILURE() << what << ": output " << i << " is " << got.out[i] << ", want " << want.out[i];
      ++bad;
    }
  // The caches are copies: the same bits, written and kept.
  EXPECT_TRUE(got.kCache == want.kCache) << what << ": the key cache";
  EXPECT_TRUE(got.vCache == want.vCache) << what << ": the value cache";
}

TEST(PagedAttention, MatchesDenseAttentionOverTheGatheredPositions) {
  uint32_t seed = 100;
  for (const PagedSpec &spec : test::pagedSpecs()) {
    const PagedScene x = test::pagedScene(spec, seed += 10);
    expectMatches(reference(x), run(x), describe(spec));
  }
}

TEST(PagedAttention, PaddingSlotsWriteNothingAndGiveZeroRows) {
  const PagedScene x = test::pagedScene(test::pagedSpecs()[1], 7);
  const PagedResult got = run(x);
  const int64_t row = x.args.heads * x.args.head;
  int64_t padding = 0;
  for (int64_t t = 0; t < x.args.batch * x.args.seq; ++t) {
    if (x.positions[t] >= 0)
      continue;
    ++padding;
    for (int64_t i = 0; i < row; ++i)
      EXPECT_EQ(got.out[t * row + i], 0.0) << "padding slot " << t;
  }
  EXPECT_EQ(padding, 5); // 0 + 2 + 3 of the spec's 3 × 5 slots
  // Only the new tokens' slots changed: 10 tokens × kv heads × head elements.
  int64_t changed = 0;
  for (size_t i = 0; i < x.kCache.size(); ++i)
    changed += got.kCache[i] != x.kCache[i];
  EXPECT_EQ(changed, 10 * x.args.kvHeads * x.args.head);
}

TEST(PagedAttention, TokensReachingBlocksOutOfRangeAreSkipped) {
  PagedScene x = test::pagedScene(test::pagedSpecs()[1], 8);
  const cpu::PagedAttentionArgs &a = x.args;
  // Sequence 0's first block names no block of the caches, sequence 1's first one past them,
  // and a token of sequence 2 sits past its table row.
  x.table[0] = -1;
  x.table[a.maxBlocks] = static_cast<int32_t>(a.blocks);
  x.positions[2 * a.seq + 0] = static_cast<int32_t>(a.maxBlocks * a.blockSize);
  const PagedResult want = reference(x), got = run(x);
  expectMatches(want, got, "blocks out of range");
  const int64_t row = a.heads * a.head;
  for (int64_t t : {int64_t(0), a.seq, 2 * a.seq})
    for (int64_t i = 0; i < row; ++i)
      ASSERT_EQ(got.out[t * row + i], 0.0) << "token " << t;
}

TEST(PagedAttention, SameBitsOnAnyThreadCount) {
  // Two query heads per kv head: with more threads than (token, kv head) pairs, a kv head's
  // query heads split into slices.
  const PagedScene x = test::pagedScene(test::pagedSpecs()[5], 9);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const PagedResult one = run(x);
  for (int threads : {2, 3, 8}) {
    omp_set_num_threads(threads);
    EXPECT_TRUE(run(x).out == one.out) << threads << " threads";
  }
  omp_set_num_threads(saved);
}

/// A prefill chunk of 8 tokens and then one decode token give causal attention over the 9.
TEST(PagedAttention, PrefillThenDecodeIsCausalAttentionOverTheSequence) {
  for (int64_t window : {int64_t(0), int64_t(3)}) {
    const int64_t B = 2, T = 9, H = 4, KH = 2, D = 16;
    const cpu::AttentionArgs dense = test::attentionOf(B, T, H, T, KH, D, true, window);
    const Floats q = test::randomFloats(B * T * H * D, -1, 1, 300),
                 k = test::randomFloats(B * T * KH * D, -1, 1, 301),
                 v = test::randomFloats(B * T * KH * D, -1, 1, 302);
    Floats want(q.size());
    cpu::attention(dense, q.data(), k.data(), v.data(), want.data());

    cpu::PagedAttentionArgs a;
    a.batch = B;
    a.heads = H;
    a.kvHeads = KH;
    a.head = D;
    a.blocks = 7;
    a.blockSize = 4;
    a.maxBlocks = 3;
    a.scale = dense.scale;
    a.window = window;
    const std::vector<int32_t> table = {5, 0, 3, 2, 6, 1};
    Floats kCache(a.blocks * a.blockSize * KH * D, 0.0f), vCache(kCache.size(), 0.0f);
    Floats got(q.size());
    // Tokens [first, first + n) of each sequence.
    auto call = [&](int64_t first, int64_t n) {
      a.seq = n;
      Floats qc, kc, vc, out(B * n * H * D);
      std::vector<int32_t> positions;
      for (int64_t b = 0; b < B; ++b) {
        auto rows = [&](const Floats &x, int64_t width) {
          return std::vector<float>(x.begin() + (b * T + first) * width,
                                    x.begin() + (b * T + first + n) * width);
        };
        for (auto [to, from, width] : {std::tuple{&qc, &q, H * D}, std::tuple{&kc, &k, KH * D},
                                       std::tuple{&vc, &v, KH * D}}) {
          const Floats r = rows(*from, width);
          to->insert(to->end(), r.begin(), r.end());
        }
        for (int64_t i = 0; i < n; ++i)
          positions.push_back(static_cast<int32_t>(first + i));
      }
      cpu::pagedAttention(a, qc.data(), kc.data(), vc.data(), positions.data(), table.data(),
                          out.data(), kCache.data(), vCache.data());
      for (int64_t b = 0; b < B; ++b)
        std::copy(out.begin() + b * n * H * D, out.begin() + (b + 1) * n * H * D,
                  got.begin() + (b * T + first) * H * D);
    };
    call(0, 8);
    call(8, 1);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5) << "window " << window << ", element " << i;
  }
}

//===----------------------------------------------------------------------===//
// The check, and the CPU device's 16-bit calls
//===----------------------------------------------------------------------===//

planfile::Attr attr(const std::string &name, planfile::AttrValue value) {
  return planfile::Attr{name, std::move(value)};
}

/// The parameters of a paged_attention call of the scene's sizes.
std::vector<planfile::Attr> pagedAttrs(const cpu::PagedAttentionArgs &a) {
  std::vector<planfile::Attr> attrs = {attr("batch", a.batch),
                                       attr("seq", a.seq),
                                       attr("heads", a.heads),
                                       attr("kv_heads", a.kvHeads),
                                       attr("head", a.head),
                                       attr("blocks", a.blocks),
                                       attr("block_size", a.blockSize),
                                       attr("max_blocks", a.maxBlocks),
                                       attr("scale", static_cast<double>(a.scale))};
  if (a.window > 0)
    attrs.push_back(attr("window", a.window));
  return attrs;
}

/// A call of `kernel` on operands of these element counts (their addresses never read), checked.
std::string checkCall(const std::string &kernel, const std::vector<planfile::Attr> &attrs,
                      std::vector<uint64_t> ins, std::vector<uint64_t> outs) {
  const catalogue::KernelInfo *info = catalogue::findKernel(kernel);
  EXPECT_TRUE(info) << kernel;
  catalogue::KernelParams params;
  std::string error;
  if (!catalogue::decodeParams(*info, attrs, params, error))
    return error;
  static float dummy;
  rt::KernelCall call;
  call.in.assign(ins.size(), &dummy);
  call.out.assign(outs.size(), &dummy);
  call.inElements = std::move(ins);
  call.outElements = std::move(outs);
  rt::KernelArgs args;
  return rt::checkKernelCall(call, params, args) ? "" : call.error;
}

TEST(PagedAttention, CheckRefusesSizesThatDoNotHold) {
  const PagedScene x = test::pagedScene(test::pagedSpecs()[1], 11);
  const cpu::PagedAttentionArgs &a = x.args;
  const std::vector<uint64_t> ins = {x.q.size(), x.k.size(), x.v.size(), x.positions.size(),
                                     x.table.size()};
  const std::vector<uint64_t> outs = {x.q.size(), x.kCache.size(), x.vCache.size()};
  EXPECT_EQ(checkCall("paged_attention", pagedAttrs(a), ins, outs), "");

  cpu::PagedAttentionArgs bad = a;
  bad.blockSize = 0;
  EXPECT_EQ(checkCall("paged_attention", pagedAttrs(bad), ins, outs),
            "has block_size 0; a cache block holds at least one position");
  bad = a;
  bad.kvHeads = 3;
  EXPECT_EQ(checkCall("paged_attention", pagedAttrs(bad), ins, outs),
            "has 4 query heads, not a multiple of its 3 kv heads");
  std::vector<planfile::Attr> attrs = pagedAttrs(a);
  attrs.push_back(attr("window", int64_t(-2)));
  EXPECT_EQ(checkCall("paged_attention", attrs, ins, outs),
            "has a sliding window of -2; a window must be positive");
  // A block table row short of max_blocks, caches short of blocks × block_size slots.
  std::vector<uint64_t> shortIns = ins;
  shortIns[4] -= 1;
  EXPECT_EQ(checkCall("paged_attention", pagedAttrs(a), shortIns, outs),
            "input 4 needs " + std::to_string(x.table.size()) + " elements but its buffer holds " +
                std::to_string(x.table.size() - 1));
  bad = a;
  bad.blocks += 1;
  EXPECT_NE(checkCall("paged_attention", pagedAttrs(bad), ins, outs).find("output 1 needs"),
            std::string::npos);
  bad = a;
  bad.seq += 1;
  EXPECT_NE(checkCall("paged_attention", pagedAttrs(bad), ins, outs).find("input 0 needs"),
            std::string::npos);
}

TEST(PagedAttention, RopeTakesPositionsOrASequenceGroupNotBoth) {
  const std::vector<planfile::Attr> attrs = {
      attr("batch", int64_t(2)), attr("seq", int64_t(3)), attr("heads", int64_t(2)),
      attr("head", int64_t(4)),  attr("theta", 10000.0),  attr("inverse", int64_t(0))};
  EXPECT_EQ(checkCall("rope", attrs, {48, 6}, {48}), "");
  EXPECT_EQ(checkCall("rope", attrs, {48, 5}, {48}),
            "input 1 needs 6 elements but its buffer holds 5");
  EXPECT_EQ(checkCall("rope", attrs, {48, 6, 6}, {48}),
            "has 2 positions operands; it takes at most one");
  std::vector<planfile::Attr> grouped = attrs;
  grouped.push_back(attr("seq_group", std::string("cp")));
  EXPECT_EQ(checkCall("rope", grouped, {48, 6}, {48}),
            "turns by given positions and by a sequence group's head-tail positions; it takes "
            "one or the other");
}

std::vector<uint16_t> toBf16(const Floats &x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = floatToBf16(x[i]);
  return out;
}
Floats fromBf16(const std::vector<uint16_t> &x) {
  Floats out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = bf16ToFloat(x[i]);
  return out;
}

/// A bf16 call through the CPU device: the cache blocks the call's sequences hold are widened
/// before the kernel and narrowed after, so the result is the f32 kernel's on the widened
/// values, rounded, and every other element of the caches is kept.
void checkSixteenBitCall(const PagedScene &x, const std::string &what) {
  std::vector<uint16_t> q = toBf16(x.q), k = toBf16(x.k), v = toBf16(x.v),
                        kCache = toBf16(x.kCache), vCache = toBf16(x.vCache), out(x.q.size());
  std::vector<int32_t> positions = x.positions, table = x.table;
  using planfile::DType;
  auto ref = [](DType t) {
    planfile::BufferRef r;
    r.dtype = t;
    return r;
  };
  const planfile::Instr instr = test::makeInstr(
      "paged_attention",
      {ref(DType::BF16), ref(DType::BF16), ref(DType::BF16), ref(DType::I32), ref(DType::I32)},
      {ref(DType::BF16), ref(DType::BF16), ref(DType::BF16)}, pagedAttrs(x.args), "test:1:1");
  const catalogue::KernelInfo &info = *catalogue::findKernel("paged_attention");
  std::unique_ptr<rt::Device> cpu = rt::createCpuDevice();
  std::string error;
  rt::KernelFn fn =
      cpu->kernel(info, {DType::BF16, DType::BF16, DType::BF16, DType::I32, DType::I32},
                  {DType::BF16, DType::BF16, DType::BF16}, error);
  ASSERT_TRUE(fn) << error;
  catalogue::KernelParams params;
  ASSERT_TRUE(catalogue::decodeParams(info, instr.attrs, params, error)) << error;
  rt::KernelCall call;
  call.instr = &instr;
  call.in = {q.data(), k.data(), v.data(), positions.data(), table.data()};
  call.out = {out.data(), kCache.data(), vCache.data()};
  call.inElements = {q.size(), k.size(), v.size(), positions.size(), table.size()};
  call.outElements = {out.size(), kCache.size(), vCache.size()};
  rt::KernelArgs args;
  ASSERT_TRUE(rt::checkKernelCall(call, params, args)) << call.error;
  ASSERT_TRUE(fn(call, args)) << call.error;

  PagedScene wide = x;
  wide.q = fromBf16(toBf16(x.q));
  wide.k = fromBf16(toBf16(x.k));
  wide.v = fromBf16(toBf16(x.v));
  wide.kCache = fromBf16(toBf16(x.kCache));
  wide.vCache = fromBf16(toBf16(x.vCache));
  const PagedResult want = run(wide);
  EXPECT_TRUE(fromBf16(kCache) == want.kCache) << what;
  EXPECT_TRUE(fromBf16(vCache) == want.vCache) << what;
  const Floats got = fromBf16(out);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], bf16ToFloat(floatToBf16(static_cast<float>(want.out[i]))))
        << what << ", " << i;
}

TEST(PagedAttention, SixteenBitCachesKeepWhatTheCallDoesNotWrite) {
  uint32_t seed = 12;
  for (const PagedSpec &spec : test::pagedSpecs())
    checkSixteenBitCall(test::pagedScene(spec, seed += 7), describe(spec));
}

} // namespace
