//===- CpuKernels.h - The CPU backend's kernels -----------------*- C++ -*-===//
//
// Every op of a plan runs as one of these functions. They work on fp32 buffers in row-major
// layout; shapes and strides come from the plan, so a kernel never sees a dim name. All are
// deterministic: the same inputs give the same bits whatever the thread count, because work is
// split over independent output elements and every reduction runs in a fixed order.
//
// Conventions:
// - `Shape` is an output shape of at most kMaxRank dims; `Strides` gives, for one operand, the
//   element stride of each output dim in that operand (0 where the operand is broadcast).
// - Gradient kernels write (never accumulate into) their outputs unless they say otherwise.
// - Kernels that can fail on data (out-of-range ids) return false and leave a message in
//   `error`; the rest cannot fail on data.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_KERNELS_CPU_CPUKERNELS_H
#define TESSEL_KERNELS_CPU_CPUKERNELS_H

#include "kernels/KernelTypes.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cpu {

// The argument types every device's kernels share (kernels/KernelTypes.h), by their own
// names here.
using namespace kernels;

//===----------------------------------------------------------------------===//
// 16-bit storage (Convert.cpp): `type` is BF16 or F16
//===----------------------------------------------------------------------===//

/// y = x, exactly.
void widen(DType type, int64_t n, const uint16_t *x, float *y);
/// y = x rounded to the nearest 16-bit value, ties to even (common/support/Float16.h).
void narrow(DType type, int64_t n, const float *x, uint16_t *y);

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//


/// out[i] = a[i . sa] (op) b[i . sb] for every index i of `shape`; `out` is dense.
void binary(BinaryKind kind, const Shape &shape, const float *a, const Strides &sa, const float *b,
            const Strides &sb, float *out);

/// out[i] = c[i . sc] != 0 ? a[i . sa] : b[i . sb] for every index i of `shape`; `out` is
/// dense.
void select(const Shape &shape, const float *c, const Strides &sc, const float *a,
            const Strides &sa, const float *b, const Strides &sb, float *out);

/// y[i] = i for i < n.
void positions(int64_t n, float *y);

/// y = f(x) elementwise. Pow raises to `exponent` (std::pow); the other kinds ignore it.
void unary(UnaryKind kind, int64_t n, const float *x, float *y, float exponent = 0.0f);

/// dx = dy * f'(x). `y` is f(x) as the forward computed it; kernels use whichever of x and y
/// gives the exact derivative cheapest (Exp, Tanh, Sigmoid, Sqrt, Rsqrt use y).
void unaryGrad(UnaryKind kind, int64_t n, const float *x, const float *y, const float *dy,
               float *dx, float exponent = 0.0f);


/// Runs `steps` for every index i of `shape` in one pass over memory: input k is read at
/// i . inStrides[k]; output o (dense) gets the value of step outSteps[o]. The element range is
/// cut into tiles spread over threads; in a tile every step runs over the tile's elements as
/// its own kernel (unary, unaryGrad, binary, select) runs, so each element's value has the same
/// bits as the unfused kernels give. Every step index in outSteps and args must be valid.
void fusedElementwise(const Shape &shape, const std::vector<FusedStep> &steps,
                      const std::vector<const float *> &inputs,
                      const std::vector<Strides> &inStrides, const std::vector<float *> &outputs,
                      const std::vector<int32_t> &outSteps);

/// out[i] = x[i . sx] for every index i of `shape`: permutes, broadcasts and copies.
void stridedCopy(const Shape &shape, const float *x, const Strides &sx, float *out);

/// y[i] = x[i] * scale.
void scale(int64_t n, const float *x, float scale, float *y);

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Sums `x` (dense, of shape `shape`) into `out`: element i of x adds to out[i . so], where
/// `so` is 0 along the reduced dims. `out` has `outElements` elements and is overwritten (with
/// `accumulate`, added to: out += float(sum), the same bits as a separate addition); the sum
/// is multiplied by `scale` (1/n for a mean). Each output element sums its inputs in
/// increasing index order in runs of kReduceRun terms (kernels/KernelTypes.h).
void reduceSum(const Shape &shape, const float *x, const Strides &so, int64_t outElements,
               float scale, float *out, bool accumulate = false);

/// The sum of squares of x, accumulated in double in index order.
double sumOfSquares(int64_t n, const float *x);

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

/// C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b < batch, through cblas_sgemm.
/// op(A) is m x k, op(B) is k x n, C[b] is m x n with leading dimension ldc. Batch b's
/// matrices start at A + b * strideA (and likewise B, C); a stride of 0 reuses one matrix.
/// (GemmArgs: kernels/KernelTypes.h.)
void gemm(const GemmArgs &args, const float *a, const float *b, float *c);

/// gemm's path for products of at most kSkinnyRows rows of A with B read transposed (a decode
/// step's output head over a tied embedding): C = alpha * A B^T + beta * C for the `m` rows of
/// A and C, each element a dot product of two contiguous rows (SkinnyGemm.cpp).
constexpr int64_t kSkinnyRows = 16;
void skinnyGemmTransB(const GemmArgs &args, int64_t m, const float *a, const float *b, float *c);
/// The same with B read in place (alpha 1, beta 0): each element sums its k terms in order, in
/// bands of B's rows.
void skinnyGemm(const GemmArgs &args, int64_t m, const float *a, const float *b, float *c);

//===----------------------------------------------------------------------===//
// Normalisation, softmax, loss
//===----------------------------------------------------------------------===//

/// Softmax over the last (contiguous) dim of a [rows, cols] buffer.
void softmax(int64_t rows, int64_t cols, const float *x, float *y);
/// dx = y * (dy - sum(dy * y)) per row.
void softmaxGrad(int64_t rows, int64_t cols, const float *y, const float *dy, float *dx);
/// y[r][j] = 1 for the k largest x[r][j] of each row and 0 elsewhere; of equal values the lower
/// j is taken first, and a NaN counts as larger than every number.
void topKMask(int64_t rows, int64_t cols, int64_t k, const float *x, float *y);

/// y = (x - mean) / sqrt(var + eps) * g + b per row (biased variance, as PyTorch).
void layerNorm(int64_t rows, int64_t cols, const float *x, const float *g, const float *b,
               float eps, float *y);
/// dx for every row; dg and db summed over rows (in row order).
void layerNormGrad(int64_t rows, int64_t cols, const float *x, const float *g, const float *dy,
                   float eps, float *dx, float *dg, float *db);

/// y = x / sqrt(mean(x^2) + eps) * g per row.
void rmsNorm(int64_t rows, int64_t cols, const float *x, const float *g, float eps, float *y);
void rmsNormGrad(int64_t rows, int64_t cols, const float *x, const float *g, const float *dy,
                 float eps, float *dx, float *dg);

/// The mean over rows of -log softmax(logits[row])[targets[row]]; logits is [rows, cols].
bool crossEntropy(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                  float *loss, std::string &error);
/// scale times the sum over rows (a batch split over ranks passes one over the whole batch's
/// rows, so that each rank's loss is its share of the mean).
bool crossEntropy(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                  double scale, float *loss, std::string &error);
/// dlogits = (softmax(logits) - onehot(targets)) * dloss / rows; `dloss` is one element.
bool crossEntropyGrad(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                      const float *dloss, float *dlogits, std::string &error);
/// dlogits = (softmax(logits) - onehot(targets)) * dloss * scale.
bool crossEntropyGrad(int64_t rows, int64_t cols, const float *logits, const int32_t *targets,
                      const float *dloss, double scale, float *dlogits, std::string &error);

//===----------------------------------------------------------------------===//
// Cross entropy over classes split between ranks (ShardedLoss.cpp)
//===----------------------------------------------------------------------===//
// logits is this rank's [rows, cols] block: global columns [first, first + cols) of
// `classes`. Targets are global class ids and must lie in [0, classes).

/// m[r] = the largest of row r's logits here.
void ceMax(int64_t rows, int64_t cols, const float *logits, float *m);
/// s[r] = sum over the row's logits here of exp(x - m[r]) (m: the global row maxima);
/// t[r] = the target's logit if the target is one of these columns, else 0.
bool ceSums(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
            const int32_t *targets, const float *m, float *s, float *t, std::string &error);
/// loss = scale * sum over rows of (log s + m - t), with s and t summed over the ranks.
void ceLoss(int64_t rows, const float *m, const float *s, const float *t, double scale,
            float *loss);
/// dlogits = (exp(x - m) / s - [global column == target]) * dloss * scale.
bool ceGrad(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
            const int32_t *targets, const float *m, const float *s, const float *dloss,
            double scale, float *dlogits, std::string &error);

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

/// out[i, :] = table[ids[i], :] for i < n, a zero row for a negative id; table is [rows, cols].
bool embedding(int64_t n, int64_t rows, int64_t cols, const float *table, const int32_t *ids,
               float *out, std::string &error);
/// dtable = 0, then dtable[ids[i], :] += dout[i, :] in order of i.
bool embeddingGrad(int64_t n, int64_t rows, int64_t cols, const float *dout, const int32_t *ids,
                   float *dtable, std::string &error);

/// The same on a table split by rows between ranks: `table` holds rows [first, first + rows)
/// of a table of `vocab` rows. An id of another rank's rows gives a zero row of `out`, and is
/// skipped by the gradient. The lookup takes a negative id as a padding slot (a zero row) and
/// refuses one of vocab or more; the gradient refuses every id outside [0, vocab).
bool embeddingRows(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                   const float *table, const int32_t *ids, float *out, std::string &error);
bool embeddingGradRows(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                       const float *dout, const int32_t *ids, float *dtable, std::string &error);

//===----------------------------------------------------------------------===//
// Attention and positions
//===----------------------------------------------------------------------===//

/// out = softmax(q k^T * scale) v per (batch, head), as AttentionArgs (kernels/KernelTypes.h)
/// lays the operands out; where `lse` is given, also each query row's log-sum-exp of its
/// scaled, visible scores, [batch, seq, heads].
void attention(const AttentionArgs &args, const float *q, const float *k, const float *v,
               float *out, float *lse = nullptr);
/// Writes dq, dk, dv. The probabilities come from q and k with the forward call's `lse` where
/// given (with its `out`, which gives each row's sum of p · dp), else from q and k alone.
void attentionGrad(const AttentionArgs &args, const float *q, const float *k, const float *v,
                   const float *dout, float *dq, float *dk, float *dv, const float *out = nullptr,
                   const float *lse = nullptr);
/// Merges the block's attention into the running output `out` [batch, seq, heads, head] and
/// log-sum-exp `lse` [batch, seq, heads] (set to 0 and −inf first when `first`).
void attentionBlock(const RingBlockArgs &args, const float *q, const float *k, const float *v,
                    bool first, float *out, float *lse);
/// Adds the block's terms of the gradients to dq, dk, dv (zeroed first when `first`), from the
/// whole attention's `out` and `lse`.
void attentionBlockGrad(const RingBlockArgs &args, const float *q, const float *k, const float *v,
                        const float *dout, const float *out, const float *lse, bool first,
                        float *dq, float *dk, float *dv);

/// Attention of new tokens over paged key/value caches, as PagedAttentionArgs
/// (kernels/KernelTypes.h) lays the operands out: stores every new token's k and v row in the
/// caches at its position, then writes each token's attention over its sequence's positions
/// (a zero row for padding and for tokens whose positions reach blocks out of range, which are
/// neither read nor written). Online softmax in f32, one pass over the keys and values.
void pagedAttention(const PagedAttentionArgs &args, const float *q, const float *k, const float *v,
                    const int32_t *positions, const int32_t *blockTable, float *out, float *kCache,
                    float *vCache);

/// Each sequence's running sum of x over its tokens (kernels::RunningSumArgs; the catalogue's
/// running_sum): the token at position p gets the sum over the sequence's tokens before p (up
/// to p with `inclusive`), the sum of earlier calls' tokens kept in totals row
/// blockTable[b, 0] (zeroed by a call whose first token is at position 0) and updated there.
/// Padding slots (negative positions), and every token of a sequence whose first block is out
/// of range, get -1 and add nothing.
void runningSum(const RunningSumArgs &args, const float *x, const int32_t *positions,
                const int32_t *blockTable, float *y, float *totals);

/// The instruction set the attention kernels and gemm's few-row products run with: "baseline",
/// "avx2" or "avx512" (the widest the CPU supports, or the one TESSEL_CPU_ISA names); every
/// one gives the same bits.
const char *isaVariant();

/// Rotary embedding on [batch, seq, heads, head] (head even), in the "rotate half" layout:
/// feature i < head/2 pairs with i + head/2 and turns by angle pos * theta^(-2i/head).
/// `inverse` turns the other way (the gradient of the forward rotation). With `headStart` ≥ 0
/// the positions here are two runs (a head-tail block, common/layout/HeadTail.h): [0, seq / 2) at
/// headStart + p, the rest at tailStart + p − seq / 2. With `positions` ([batch, seq]) token
/// (b, s) is at positions[b * seq + s] instead, a negative one at 0 (a padding slot), and the
/// head-tail runs are not used. `scaling` rescales the frequencies as Llama 3 does
/// (kernels/RopeFrequency.h).
void rope(int64_t batch, int64_t seq, int64_t heads, int64_t head, float theta, bool inverse,
          const float *x, float *y, int64_t headStart = -1, int64_t tailStart = -1,
          const kernels::RopeScaling &scaling = {}, const int32_t *positions = nullptr);

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// y = x * mask / (1 - rate), where mask[i] is a pure function of (seed, i): the backward
/// pass calls dropout on dy with the same seed to apply the same mask.
void dropout(int64_t n, float rate, uint64_t seed, const float *x, float *y);
/// Dropout on this rank's block of a split tensor: `shape` is the block, starting at `offset`
/// in a whole tensor of `wholeShape`; each element gets the mask of its place in the whole
/// tensor, so the result is the block of the whole tensor's dropout. Where `tail[d]` is not
/// negative, dim d is split head-tail (common/layout/HeadTail.h): the second half of the block starts
/// at `tail[d]` in the whole.
void dropoutBlock(const std::vector<int64_t> &shape, const std::vector<int64_t> &offset,
                  const std::vector<int64_t> &tail, const std::vector<int64_t> &wholeShape,
                  float rate, uint64_t seed, const float *x, float *y);

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// One AdamW step as PyTorch's torch.optim.AdamW (decoupled weight decay, bias correction),
/// on the gradient g * gradScale (gradScale carries clipping). `step` counts from 1.
struct AdamWArgs : kernels::AdamWHyper {
  float lr = 0;
  int64_t step = 1;
  float gradScale = 1.0f;
};
/// One tensor of a multi-tensor optimizer step: its elements and buffers.
struct AdamWTensor {
  int64_t n = 0;
  float *param = nullptr;
  const float *grad = nullptr;
  float *m = nullptr, *v = nullptr;
};
/// One AdamW step on each of `count` tensors: the bits of a step on each in turn, with the
/// elements of all of them shared among the threads (many small tensors cost one parallel
/// region, not one each).
void adamw(const AdamWArgs &args, const AdamWTensor *tensors, size_t count);
/// One AdamW step on one tensor of n elements.
inline void adamw(const AdamWArgs &args, int64_t n, float *param, const float *grad, float *m,
                  float *v) {
  const AdamWTensor t{n, param, grad, m, v};
  adamw(args, &t, 1);
}

/// One SGD step with momentum as torch.optim.SGD (no dampening, no Nesterov), on the gradient
/// g × gradScale: buf = momentum buf + g + weightDecay param; param -= lr buf. The buffer starts
/// at zero, so the first step's buffer is the gradient itself.
struct SgdArgs {
  float lr = 0, momentum = 0, weightDecay = 0, gradScale = 1.0f;
};
struct SgdTensor {
  int64_t n = 0;
  float *param = nullptr;
  const float *grad = nullptr;
  float *momentum = nullptr;
};
/// One SGD step on each of `count` tensors, their elements shared among the threads.
void sgd(const SgdArgs &args, const SgdTensor *tensors, size_t count);

//===----------------------------------------------------------------------===//
// Buckets
//===----------------------------------------------------------------------===//

/// Copies `count` inputs into one bucket y of [ways, part], part = sum of outers[i] *
/// chunks[i]: input i is viewed as [outers[i], ways, chunks[i]], and y[r, :] is the
/// concatenation over i of input i's [:, r, :]. With ways = 1 it concatenates the inputs.
void pack(int64_t count, const float *const *inputs, const int64_t *outers, const int64_t *chunks,
          int64_t ways, float *y);

} // namespace tessel::cpu

#endif // TESSEL_KERNELS_CPU_CPUKERNELS_H
