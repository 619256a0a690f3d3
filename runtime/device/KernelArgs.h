//===- KernelArgs.h - Each kernel's arguments, checked once for every device -*- C++ -*-===//
//
// A kernel call's parameters (common/catalogue/KernelCatalogue.h) say what the plan asked for; its
// arguments here say what the kernels take: shapes and strides as kernels/KernelTypes.h lays
// them out, a rank's block of a dim split over a group, a product's batch offsets, attention's
// sizes under a head or sequence group, a collective's operation. checkKernelCall derives them
// when a plan is loaded, checking the parameters against the call's operands and the rank's
// groups, the same for every device; a device's KernelFn takes them and only launches.
//
// No argument holds an operand's address: a device may run a call on other buffers than the
// plan's (a 16-bit call widened into f32 scratch), so the addresses are the call's at launch.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_KERNELARGS_H
#define TESSEL_RUNTIME_DEVICE_KERNELARGS_H

#include "runtime/comm/Communicator.h"
#include "runtime/device/KernelCall.h"

#include "kernels/KernelTypes.h"

#include "common/catalogue/KernelCatalogue.h"

#include <array>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

namespace tessel::rt {

namespace args {

using kernels::AttentionArgs;
using kernels::FusedStep;
using kernels::GemmArgs;
using kernels::RingBlockArgs;
using kernels::Shape;
using kernels::Strides;

struct Fill {
  int64_t n = 0;
  float value = 0;
};
struct Positions {
  int64_t n = 0;
};
/// y = a op b over `shape`, each input read through its strides.
struct Binary {
  catalogue::BinaryOp op{};
  Shape shape;
  Strides a, b;
};
struct Unary {
  catalogue::UnaryOp op{};
  int64_t n = 0;
  float exponent = 0; ///< pow's; 0 for the functions that have none.
};
struct UnaryGrad : Unary {};
struct Where {
  Shape shape;
  Strides cond, a, b;
};
/// The body's steps as the kernels take them (value numbers: inputs first, then steps), each
/// input's strides, and which step each output takes.
struct FusedElementwise {
  Shape shape;
  std::vector<Strides> strides;
  std::vector<FusedStep> steps;
  std::vector<int32_t> outSteps;
};
/// Where dropout's block lies in the whole tensor of one micro-batch: per dim its offset, the
/// start of its second chunk under a head-tail split (-1 where none) and the whole size
/// (dropoutPlacement adds the micro-batch).
struct Dropout {
  std::vector<int64_t> shape, offset, tail, whole;
  int64_t n = 0;
  float rate = 0;
  int64_t mask = 0;
  int64_t batchDim = -1, microBatches = 1;
};
struct Copy {
  Shape shape;
  Strides x;
  int64_t xOffset = 0; ///< The element of x that y's first is.
};
struct Reduce {
  Shape shape;
  Strides y;
  int64_t yElements = 0;
  float scale = 1;
  bool accumulate = false;
};
struct Accumulate {
  int64_t n = 0;
};
struct Pack {
  std::vector<int64_t> outers, chunks;
  int64_t ways = 0;
};
/// The product's sizes, leading dims, `accumulate` as beta and the last batch dim as the
/// strided batch (`args`); the operand offsets (a, b, c) of each index of the other batch dims,
/// row-major, each one product.
struct Gemm {
  GemmArgs args;
  std::vector<std::array<int64_t, 3>> offsets;
};
/// A row-wise kernel's positive sizes.
struct Rows {
  int64_t rows = 0, cols = 0;
};
struct Softmax : Rows {};
struct SoftmaxGrad : Rows {};
struct CeMax : Rows {};
struct TopKMask : Rows {
  int64_t k = 0;
};
struct Norm : Rows {
  float eps = 0;
};
struct LayerNorm : Norm {};
struct LayerNormGrad : Norm {};
struct RmsNorm : Norm {};
struct RmsNormGrad : Norm {};
/// The head block under `head_group`, the head-tail queries under `seq_group`.
struct Attention {
  AttentionArgs a;
  /// attention: also writes each query row's log-sum-exp (output 1). attention_grad: reads
  /// the forward call's output and log-sum-exp (inputs 4 and 5) instead of computing them.
  bool lse = false;
};
struct AttentionGrad : Attention {};
/// A ring step's sizes, head block and ring indices (placeRingBlocks gives its blocks'
/// places as AttentionArgs).
struct AttentionBlock {
  RingBlockArgs r;
  bool first = false; ///< Step 0, which starts the running values.
};
struct AttentionBlockGrad : AttentionBlock {};
/// The sizes of the new tokens, the caches and the block table (the operands' layouts are
/// kernels::PagedAttentionArgs').
struct PagedAttention {
  kernels::PagedAttentionArgs a;
};
struct RunningSum {
  kernels::RunningSumArgs a;
};
/// Under a head-tail `seq_group` the rows' positions are two runs starting at headStart and
/// tailStart; else both are -1. With `positions` (input 1) each row turns by its own.
struct Rope {
  int64_t batch = 0, seq = 0, heads = 0, head = 0;
  float theta = 0;
  bool inverse = false;
  int64_t headStart = -1, tailStart = -1;
  bool positions = false;
  kernels::RopeScaling scaling;
};
/// This rank's rows [first, first + rows) of a table of `vocab` rows.
struct Embedding {
  int64_t n = 0, rows = 0, cols = 0, first = 0, vocab = 0;
};
struct EmbeddingGrad : Embedding {};
/// Without `scaled`, the loss is the mean over rows.
struct CrossEntropy : Rows {
  bool scaled = false;
  double scale = 0;
};
struct CrossEntropyGrad : CrossEntropy {};
/// This rank's columns [first, first + cols) of `classes`.
struct CeSums : Rows {
  int64_t first = 0, classes = 0;
};
struct CeGrad : CeSums {
  double scale = 0;
};
struct CeLoss {
  int64_t rows = 0;
  double scale = 0;
};
struct GlobalNorm {};
struct SumSquares {};
struct GuardFinite {};
struct ClipCoefficient {
  float max = 0;
};
/// The schedule, evaluated at each launch's step (scheduledLearningRate).
struct LearningRate {
  catalogue::LearningRate schedule;
};
/// Tensor t of n.size(): grad[t], then lr and c; param[t], m[t], v[t] and, with `working`,
/// working[t].
struct AdamW {
  std::vector<int64_t> n;
  kernels::AdamWHyper hyper;
  bool working = false;
};
/// Tensor t of n.size(): grad[t], then lr and c; param[t] and momentum[t].
struct Sgd {
  std::vector<int64_t> n;
  float momentum = 0, weightDecay = 0;
};
/// A collective or transfer: the communicator's operation without its buffers (the launch
/// adds the call's), or, on a group of one rank, a copy of `aloneBytes`. Along a head-tail dim
/// the whole side is reordered through a buffer of `wholeBytes`.
struct Collective {
  CommOp op;
  bool alone = false;
  uint64_t aloneBytes = 0;
  bool headTail = false;
  uint64_t wholeBytes = 0;
  std::optional<int64_t> event;
};
struct AllReduce : Collective {};
struct AllGather : Collective {};
struct ReduceScatter : Collective {};
struct AllToAll : Collective {};
struct Broadcast : Collective {};
struct Send : Collective {};
struct Recv : Collective {};
struct Wait {
  int64_t event = 0;
};
/// y (dense, of `shape`) = x + `offset` read through `strides`.
struct ShardSlice {
  Shape shape;
  Strides x;
  int64_t offset = 0;
};

} // namespace args

/// One call's checked arguments: the struct of its kernel (the variant's index is the
/// kernel's id + 1, as catalogue::KernelParams').
struct KernelArgs {
  std::variant<std::monostate
#define TESSEL_KERNEL(Id, Name, Family, Doc) , args::Id
#include "common/catalogue/KernelCatalogue.def"
               >
      value;

  catalogue::KernelId id() const { return static_cast<catalogue::KernelId>(value.index() - 1); }
  template <class A> const A &as() const { return *std::get_if<A>(&value); }
};

/// Checks the call's parameters `params` against its operands (call.in, call.inElements, ...)
/// and the rank's groups, and derives its arguments. False with the reason in call.error.
bool checkKernelCall(KernelCall &call, const catalogue::KernelParams &params, KernelArgs &args);

//===----------------------------------------------------------------------===//
// What launches compute from the step
//===----------------------------------------------------------------------===//

/// The learning rate of `step` (counting from 1) under `p`'s schedule, in f64: what
/// learning_rate writes (rounded to f32) on every device.
double scheduledLearningRate(const catalogue::LearningRate &p, int64_t step);

/// Cross entropy's factor at the call's step: the plan's (scale, or 1 / rows where it has none)
/// times StepContext::targetScale, so that the loss is the mean over the targets that count.
/// Where targetScale is 1 the arguments are returned as they are (the kernels' own 1 / rows).
args::CrossEntropy stepLossScale(const KernelCall &c, const args::CrossEntropy &a);
/// The same for the split loss's `scale` (ce_loss, ce_grad).
double stepLossScale(const KernelCall &c, double scale);

/// The seed of dropout's mask for op `mask` of the call's step: one mask per (run seed, step,
/// op), so the backward pass reproduces the forward's.
uint64_t dropoutSeed(const KernelCall &c, int64_t mask);

/// Dropout's offsets and whole sizes in the whole step batch: the block's in its micro-batch,
/// moved along the batch dim to the call's micro-batch.
void dropoutPlacement(const KernelCall &c, const args::Dropout &a, std::vector<int64_t> &offset,
                      std::vector<int64_t> &whole);

/// Sets r.attention's head-tail starts of the queries and the keys from the ring indices
/// (RingBlockArgs::queryPosition, keyPosition), as the CUDA ring steps take them.
void placeRingBlocks(kernels::RingBlockArgs &r);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_KERNELARGS_H
