//===- KernelTypes.h - What the kernels of every device take ------*- C++ -*-===//
//
// The argument types the CPU kernels (kernels/cpu) and the CUDA kernels (kernels/cuda) share,
// and that the runtime's device-neutral checks (runtime/device/KernelArgs.h) fill in once per
// call: shapes and strides, the operation kinds (the catalogue's own enums, common/catalogue/KernelOps.h),
// a fused elementwise step, a product's layout, attention's sizes, the 16-bit storage types, and
// the order in which a long sum is added up (so both devices give the same bits). Neither
// backend owns this header.
//
// Conventions: `Shape` is an output shape of at most kMaxRank dims; `Strides` gives, for one
// operand, the element stride of each output dim in that operand (0 where it is broadcast).
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_KERNELTYPES_H
#define TESSEL_KERNELS_KERNELTYPES_H

#include "common/catalogue/KernelOps.h"
#include "common/support/DType.h"

#include <cstdint>

namespace tessel::kernels {

constexpr int kMaxRank = 8;

/// A cross-entropy target that counts for nothing: its row adds 0 to the loss and gets a zero
/// logit gradient (the tokens of a prompt when only the completion is trained, and padding).
/// Every other target must be a class.
constexpr int32_t kIgnoredTarget = -1;

struct Shape {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t numElements() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i)
      n *= size[i];
    return n;
  }
};

struct Strides {
  int64_t stride[kMaxRank] = {};
};

/// The row-major strides of `shape` (what a dense operand with the output's dims uses).
inline Strides denseStrides(const Shape &shape) {
  Strides s;
  int64_t step = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    s.stride[i] = step;
    step *= shape.size[i];
  }
  return s;
}

/// Element types are the plan's (common/support/DType.h); a kernel argument naming a 16-bit
/// storage type of mixed precision takes BF16 or F16.
using planfile::DType;

/// The elementwise operations: arithmetic, then comparisons (which give 1.0 where they hold
/// and 0.0 elsewhere); the functions. Gelu is the tanh approximation (GPT-2, PyTorch's
/// gelu(approximate="tanh")), GeluErf the exact x * Phi(x) (PyTorch's gelu()).
using BinaryKind = catalogue::BinaryOp;
using UnaryKind = catalogue::UnaryOp;

/// One step of a fused elementwise program: a value per element, from the operands `args`
/// (value numbers: the inputs first, 0 .. inputs - 1, then the steps in order).
struct FusedStep {
  enum class Kind { Const, Unary, UnaryGrad, Binary, Where };
  Kind kind = Kind::Const;
  UnaryKind unary = UnaryKind::Neg;
  BinaryKind binary = BinaryKind::Add;
  int32_t args[3] = {0, 0, 0}; ///< Unary: x; UnaryGrad: x, y, dy; Binary: a, b; Where: c, a, b.
  float value = 0;             ///< Const: the value; pow (Unary, UnaryGrad): the exponent.
  /// Whether the step's value is rounded to `narrow` (to nearest even) before anything reads
  /// it: in a mixed-precision plan, a value its unfused kernel would store 16-bit.
  bool rounded = false;
  DType narrow = DType::BF16;

  /// How many of `args` a step of `kind` reads.
  static constexpr int operandsOf(Kind kind) {
    return kind == Kind::Const ? 0 : kind == Kind::Unary ? 1 : kind == Kind::Binary ? 2 : 3;
  }
};

/// The order of a long sum (reduce): each output element sums its inputs in increasing index
/// order, in f64, in runs of kReduceRun terms: the sum of each run, then the runs' sums in
/// order. So a GPU may sum the runs of one output in parallel and give the CPU's bits; an
/// output of at most kReduceRun terms is the plain sum in order.
constexpr int64_t kReduceRun = 256;

/// AdamW's hyperparameters, as torch.optim.AdamW names them (weight_decay decoupled).
/// Llama 3's rescaling of rotary frequencies (kernels/RopeFrequency.h); factor 0: none.
struct RopeScaling {
  double factor = 0, lowFreqFactor = 1, highFreqFactor = 4, originalContext = 8192;
};

struct AdamWHyper {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0;
};

/// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b < batch, row-major. op(A) is m x k,
/// op(B) is k x n, C[b] is m x n with leading dimension ldc. Batch b's matrices start at
/// A + b * strideA (and likewise B, C); a stride of 0 reuses one matrix.
struct GemmArgs {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  float alpha = 1.0f, beta = 0.0f;
};

/// Layouts: q and out are [batch, seq, heads, head]; k and v are [batch, kvSeq, kvHeads,
/// head]. Query head h reads key/value head h / (heads / kvHeads). `causal` masks key
/// positions j > i (with kvSeq == seq). out = softmax(q k^T * scale) v.
struct AttentionArgs {
  int64_t batch = 0, seq = 0, heads = 0, kvSeq = 0, kvHeads = 0, head = 0;
  bool causal = false;
  /// With `causal`, a sliding window: query i sees keys i - window + 1 .. i (0: all before).
  int64_t window = 0;
  float scale = 1.0f;
  /// A block of the query heads of a wider attention whose kv heads are all here (tensor
  /// parallelism over fewer kv heads than ranks): query head h is head firstHead + h of the
  /// whole, and reads kv head (firstHead + h) / group. A group of 0 means heads / kvHeads.
  int64_t firstHead = 0, group = 0;
  /// Context parallelism with every key here: the queries are the two chunks of a head-tail
  /// split (common/layout/HeadTail.h), queries [0, seq / 2) at positions headStart + i and the rest at
  /// tailStart + i - seq / 2 of the kvSeq keys. Negative: query i is at position i.
  int64_t headStart = -1, tailStart = -1;
  /// The same for the keys, where they are a head-tail block too (one step of ring attention
  /// as the CUDA kernels run it: RingBlockArgs places the CPU's keys itself). Negative: key j
  /// is at position j.
  int64_t keyHeadStart = -1, keyTailStart = -1;
};

/// Attention of new tokens over paged key/value caches (paged_attention, as vLLM's paged
/// attention): q and out are [batch, seq, heads, head], k and v [batch, seq, kvHeads, head]
/// (the new tokens' keys and values), positions [batch, seq] (i32; negative: a padding slot),
/// the block table [batch, maxBlocks] (i32) and each cache [blocks, blockSize, kvHeads, head].
/// Position p of sequence b lives in slot p % blockSize of cache block
/// table[b][p / blockSize]. Every new token's key and value is stored at its position first;
/// then the token at position p attends over positions max(0, p - window + 1) .. p of its
/// sequence (window 0: from 0), query head h reading kv head h / (heads / kvHeads). A padding
/// token, or one whose positions reach a block index of maxBlocks or more or a block id outside
/// [0, blocks) (a caller's error), stores nothing and gets a zero output row; no kernel reads
/// or writes outside the caches for it.
struct PagedAttentionArgs {
  int64_t batch = 0, seq = 0, heads = 0, kvHeads = 0, head = 0;
  int64_t blocks = 0, blockSize = 0, maxBlocks = 0;
  float scale = 1.0f;
  int64_t window = 0;
};

/// x and y are [batch, seq, width], positions [batch, seq], blockTable [batch, maxBlocks],
/// totals [blocks, width] (the running_sum kernel of the catalogue).
struct RunningSumArgs {
  int64_t batch = 0, seq = 0, width = 0, blocks = 0, maxBlocks = 0;
  bool inclusive = false;
};

/// One step of ring attention (context parallelism, RingAttention.cpp): the queries here and
/// a block of keys and values of the same length `attention.seq` are the head-tail blocks of
/// indices `queryIndex` and `keyIndex` of a group of `ways` (common/layout/HeadTail.h); `attention`
/// gives the sizes, scale, causal flag and query-head block (kvSeq and window unused).
struct RingBlockArgs {
  AttentionArgs attention;
  int64_t queryIndex = 0, keyIndex = 0, ways = 1;
  /// Places in the whole sequence of query i and key j here.
  int64_t queryPosition(int64_t i) const { return positionOf(queryIndex, i); }
  int64_t keyPosition(int64_t j) const { return positionOf(keyIndex, j); }
  /// Where element i of the head-tail block of `index` lies in the whole sequence: its first
  /// half is chunk `index`, its second chunk 2 * ways - 1 - index (common/layout/HeadTail.h).
  int64_t positionOf(int64_t index, int64_t i) const {
    const int64_t half = attention.seq / 2, chunk = i < half ? index : 2 * ways - 1 - index;
    return chunk * half + (i < half ? i : i - half);
  }
};

} // namespace tessel::kernels

#endif // TESSEL_KERNELS_KERNELTYPES_H
