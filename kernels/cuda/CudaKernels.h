//===- CudaKernels.h - The CUDA backend's kernels ---------------*- C++ -*-===//
//
// The GPU counterparts of kernels/cpu/CpuKernels.h, one layer per file, each with the same
// meaning and parameters as its CPU kernel (the reference the tests compare it with). Every
// launcher queues its work on `stream` and returns at once: pointers are device addresses,
// scalars the kernel reads from device memory (a learning rate, a loss gradient) are pointers
// too. A launcher checks its shape preconditions and returns cudaErrorInvalidValue if they do
// not hold, otherwise the launch's own error; faults inside a kernel surface at the stream's
// next synchronisation.
//
// Buffers are f32 (ids i32) unless a launcher takes ConstFloats / Floats: those read and write
// each operand at its own type (f32, bf16, f16), so a mixed-precision plan's calls run on them
// without widening copies; every kernel computes in f32.
//
// Unlike the CPU kernels, these make no promise of the CPU's bits: reductions run in a fixed
// order (the same result on every run), but in f32 and in a different order from the CPU's.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_KERNELS_CUDA_CUDAKERNELS_H
#define TESSEL_KERNELS_CUDA_CUDAKERNELS_H

#include "kernels/KernelTypes.h"

#include "kernels/cuda/BlasLt.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <vector>

namespace tessel::cuda {

#if defined(__CUDACC__)
#define TESSEL_CUDA_HOST_DEVICE __host__ __device__
#else
#define TESSEL_CUDA_HOST_DEVICE
#endif

/// Element types are the plan's (common/support/DType.h); an operand a launcher takes in its
/// own type (ConstFloats, Floats: a product's operands, AdamW's working copies, a generated
/// fused kernel's operands) is F32, BF16 or F16.
using planfile::DType;

/// Bytes of one element of type `t`, signed as the kernels' index arithmetic is.
TESSEL_CUDA_HOST_DEVICE constexpr int64_t elementBytes(DType t) {
  return static_cast<int64_t>(planfile::dtypeBytes(t));
}

/// A float operand in its buffer's own element type. A launcher given operands that are not all
/// f32 loads each at its type, computes in f32 and stores each output rounded to nearest even:
/// the values of the widening wrapper (runtime/device/HalfOperands.h) without its copies. An
/// f32 pointer converts to one, so f32 callers pass their pointers as they are, and a launcher
/// whose operands are all f32 runs its kernel on plain pointers.
struct ConstFloats {
  const void *data = nullptr;
  DType type = DType::F32;
  ConstFloats() = default;
  TESSEL_CUDA_HOST_DEVICE ConstFloats(const float *p) : data(p) {}
  TESSEL_CUDA_HOST_DEVICE ConstFloats(const void *p, DType t) : data(p), type(t) {}
};
/// An output operand in its buffer's own element type (see ConstFloats).
struct Floats {
  void *data = nullptr;
  DType type = DType::F32;
  Floats() = default;
  TESSEL_CUDA_HOST_DEVICE Floats(float *p) : data(p) {}
  TESSEL_CUDA_HOST_DEVICE Floats(void *p, DType t) : data(p), type(t) {}
  TESSEL_CUDA_HOST_DEVICE operator ConstFloats() const { return ConstFloats(data, type); }
};

// The argument types every device's kernels share (kernels/KernelTypes.h), by their own
// names here.
using namespace kernels;

/// Where a kernel that reads ids (cross entropy) records the first id outside [0, limit):
/// device memory, zeroed by its owner; `flag` is set once, by the first bad id found.
struct IdError {
  int flag;
  int32_t id;
  long long position;
  long long limit;
};

//===----------------------------------------------------------------------===//
// Elementwise (Elementwise.cu)
//===----------------------------------------------------------------------===//

/// y[i] = value for i < n.
cudaError_t fill(int64_t n, float value, Floats y, cudaStream_t stream);
/// y[i] = y[i] + x[i], or with `max` the larger (a NaN in either kept), for i < n: the
/// collectives' reduction between ranks sharing a GPU, with the bits of the host's reduceInto.
cudaError_t combine(bool max, int64_t n, float *y, const float *x, cudaStream_t stream);
/// The same with x of a 16-bit type, widened exactly (a bf16 or f16 collective's sums, which
/// are f32 until the end).
cudaError_t combine(bool max, DType type, int64_t n, float *y, const uint16_t *x,
                    cudaStream_t stream);
/// y[i] = i for i < n.
cudaError_t positions(int64_t n, float *y, cudaStream_t stream);
/// out[i] = a[i . sa] (op) b[i . sb] for every index i of `shape`; `out` is dense.
cudaError_t binary(BinaryKind kind, const Shape &shape, ConstFloats a, const Strides &sa,
                   ConstFloats b, const Strides &sb, Floats out, cudaStream_t stream);
/// out[i] = c[i . sc] != 0 ? a[i . sa] : b[i . sb]; `out` is dense.
cudaError_t select(const Shape &shape, ConstFloats c, const Strides &sc, ConstFloats a,
                   const Strides &sa, ConstFloats b, const Strides &sb, Floats out,
                   cudaStream_t stream);
/// out[i] = x[i . sx]: permutes, broadcasts and copies (and converts, between types).
cudaError_t stridedCopy(const Shape &shape, ConstFloats x, const Strides &sx, Floats out,
                        cudaStream_t stream);
/// The same over 16-bit elements (bf16 or f16), moved as bits: a copy between buffers of one
/// 16-bit type, which widening and narrowing would give the same values at three times the
/// traffic.
cudaError_t stridedCopyBits16(const Shape &shape, const uint16_t *x, const Strides &sx,
                              uint16_t *out, cudaStream_t stream);
/// y = f(x), as cpu::unary (Gelu the tanh form, GeluErf the exact one, Pow by `exponent`).
cudaError_t unary(UnaryKind kind, int64_t n, ConstFloats x, Floats y, float exponent,
                  cudaStream_t stream);
/// dx = dy * f'(x), as cpu::unaryGrad; `y` is f(x).
cudaError_t unaryGrad(UnaryKind kind, int64_t n, ConstFloats x, ConstFloats y, ConstFloats dy,
                      Floats dx, float exponent, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Softmax over the last dim (Softmax.cu) and the top-k mask (TopK.cu)
//===----------------------------------------------------------------------===//

cudaError_t softmax(int64_t rows, int64_t cols, ConstFloats x, Floats y, cudaStream_t stream);
/// dx = y * (dy - sum(dy * y)) per row.
cudaError_t softmaxGrad(int64_t rows, int64_t cols, ConstFloats y, ConstFloats dy, Floats dx,
                        cudaStream_t stream);
/// y = 1 at the k largest of each row of x (ties: the lower column), 0 elsewhere.
cudaError_t topKMask(int64_t rows, int64_t cols, int64_t k, const float *x, float *y,
                     cudaStream_t stream);

//===----------------------------------------------------------------------===//
// LayerNorm and RMSNorm (Norm.cu)
//===----------------------------------------------------------------------===//

/// Elements of f32 workspace the gradient kernels need for `rows` rows of `cols` (the rows'
/// statistics and the parameter gradients' partial sums).
int64_t normGradWorkspace(int64_t rows, int64_t cols);

/// y = (x - mean) / sqrt(var + eps) * g + b per row (biased variance).
cudaError_t layerNorm(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats b,
                      float eps, Floats y, cudaStream_t stream);
/// dx per row; dg and db summed over rows (db may be null). `workspace` holds
/// normGradWorkspace(rows, cols) floats.
cudaError_t layerNormGrad(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats dy,
                          float eps, Floats dx, Floats dg, Floats db, float *workspace,
                          cudaStream_t stream);
/// y = x / sqrt(mean(x^2) + eps) * g per row.
cudaError_t rmsNorm(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, float eps, Floats y,
                    cudaStream_t stream);
cudaError_t rmsNormGrad(int64_t rows, int64_t cols, ConstFloats x, ConstFloats g, ConstFloats dy,
                        float eps, Floats dx, Floats dg, float *workspace, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Cross entropy over the last dim (Loss.cu)
//===----------------------------------------------------------------------===//

/// Elements of f32 workspace crossEntropy needs for `rows` rows.
int64_t crossEntropyWorkspace(int64_t rows);

/// loss[0] = the mean over rows (scaled: scale times the sum) of -log softmax(logits)[target].
/// A target outside [0, cols) is recorded in `idError` and makes the loss NaN.
cudaError_t crossEntropy(int64_t rows, int64_t cols, ConstFloats logits, const int32_t *targets,
                         bool scaled, double scale, float *loss, float *workspace, IdError *idError,
                         cudaStream_t stream);
/// dlogits = (softmax(logits) - onehot(targets)) * dloss[0] / rows (scaled: * scale instead
/// of / rows). A bad target is recorded as above and its row left as the softmax times the
/// factor.
cudaError_t crossEntropyGrad(int64_t rows, int64_t cols, ConstFloats logits, const int32_t *targets,
                             const float *dloss, bool scaled, double scale, Floats dlogits,
                             IdError *idError, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Cross entropy over classes split between ranks (ShardedLoss.cu)
//===----------------------------------------------------------------------===//
// As kernels/cpu/CpuKernels.h's ceMax .. ceGrad: logits is this rank's [rows, cols] block,
// global columns [first, first + cols) of `classes`. A target outside [0, classes) is recorded
// in `idError` (and counts as no column here).

cudaError_t ceMax(int64_t rows, int64_t cols, const float *logits, float *m, cudaStream_t stream);
cudaError_t ceSums(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
                   const int32_t *targets, const float *m, float *s, float *t, IdError *idError,
                   cudaStream_t stream);
cudaError_t ceLoss(int64_t rows, const float *m, const float *s, const float *t, double scale,
                   float *loss, cudaStream_t stream);
cudaError_t ceGrad(int64_t rows, int64_t cols, int64_t first, int64_t classes, const float *logits,
                   const int32_t *targets, const float *m, const float *s, const float *dloss,
                   double scale, float *dlogits, IdError *idError, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Optimizers (AdamW.cu, Sgd.cu)
//===----------------------------------------------------------------------===//

/// cpu::AdamWArgs with the two scalars the step computes on the device (the scheduled
/// learning rate, the clipping factor) read from device memory.
struct AdamWArgs : kernels::AdamWHyper {
  int64_t step = 1;
  const float *lr = nullptr;        ///< One element.
  const float *gradScale = nullptr; ///< One element.
  /// The type of the tensors' working copies (AdamWTensor::working).
  DType workingType = DType::BF16;
};
/// One tensor of a multi-tensor AdamW step. `working`, if not null, is where the same pass
/// writes the new parameter in AdamWArgs::workingType (rounded to nearest even): the
/// parameter's working copy, made without another pass over memory.
struct AdamWTensor {
  int64_t n = 0;
  float *param = nullptr;
  const float *grad = nullptr;
  float *m = nullptr, *v = nullptr;
  void *working = nullptr;
};
/// One AdamW step on each of `count` tensors, as cpu::adamw, in as few launches as the
/// tensors' table takes (MultiTensor.cuh: up to 36 tensors and 320 chunks of 64 Ki elements
/// each).
cudaError_t adamw(const AdamWArgs &args, const AdamWTensor *tensors, size_t count,
                  cudaStream_t stream);

/// cpu::SgdArgs with the learning rate and the gradient's scale read from device memory.
struct SgdArgs {
  float momentum = 0, weightDecay = 0;
  const float *lr = nullptr;        ///< One element.
  const float *gradScale = nullptr; ///< One element.
};
struct SgdTensor {
  int64_t n = 0;
  float *param = nullptr;
  const float *grad = nullptr;
  float *momentum = nullptr;
};
/// One SGD step with momentum on each of `count` tensors, as cpu::sgd.
cudaError_t sgd(const SgdArgs &args, const SgdTensor *tensors, size_t count, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Matrix products through cuBLASLt (Gemm.cu)
//===----------------------------------------------------------------------===//

/// What a product runs with: cuBLASLt's functions (BlasLt.h), its handle and a workspace that
/// only the products of one stream use (cuBLASLt's workspace must not be shared by concurrent
/// products). The device owns them (created once).
/// The algorithms cuBLASLt chose for the products met so far, by everything the choice depends
/// on (sizes, strides, transposes, types, operand alignment, workspace): asking its heuristic
/// costs more host time than a small product runs.
struct BlasPlans {
  using Key = std::array<int64_t, 19>;
  struct Choice {
    bool found = false; ///< False: cuBLASLt has none (the plain kernel runs).
    cublasLtMatmulAlgo_t algo{};
    /// The product's descriptors, made with the choice and kept for every later call of the
    /// shape (destroyed with the plans).
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  };
  std::map<Key, Choice> choices;
  /// The cuBLASLt that made the kept descriptors.
  const BlasLt *lt = nullptr;

  BlasPlans() = default;
  BlasPlans(BlasPlans &&other) noexcept { *this = std::move(other); }
  BlasPlans &operator=(BlasPlans &&other) noexcept;
  BlasPlans(const BlasPlans &) = delete;
  BlasPlans &operator=(const BlasPlans &) = delete;
  ~BlasPlans();

private:
  void release();
};

struct BlasContext {
  const BlasLt *lt = nullptr;
  /// Where chosen algorithms are kept (owned by the device, one per stream); null: choose on
  /// every call.
  BlasPlans *plans = nullptr;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Lets f32 products multiply in TF32 (about 10 bits of mantissa, much faster on tensor
  /// cores). Off by default, so that f32 results stay comparable with the CPU backend's.
  bool allowTf32 = false;
};

/// The cuBLASLt workspace a stream's products are given: 32 MiB, what NVIDIA recommends on
/// Hopper (smaller workspaces rule out some of the fastest algorithms there).
constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;

/// C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for b < args.batch, row-major as cpu::gemm
/// (GemmArgs: lda/ldb/ldc are row strides, batch b's matrices start at A + b * strideA, a
/// stride of 0 reuses one matrix; with strideC == 0 every batch writes the same C, in order).
/// f32 in and out, f32 accumulation. Returns cuBLASLt's status (CUBLAS_STATUS_INVALID_VALUE
/// for sizes that do not fit cuBLASLt's 32-bit dims or a batch that is not positive).
cublasStatus_t gemm(const BlasContext &blas, const GemmArgs &args, const float *a, const float *b,
                    float *c, cudaStream_t stream);
/// The same with 16-bit A and B (`ab`, BF16 or F16) on the tensor cores, accumulated in f32,
/// into a C of f32 (a weight's gradient under mixed precision) or of A's type (an activation:
/// the f32 sum rounded once to nearest even, as the CPU's widened product rounds it; with
/// beta ≠ 0, C is read at its type). Other combinations return CUBLAS_STATUS_NOT_SUPPORTED.
cublasStatus_t gemmMixed(const BlasContext &blas, const GemmArgs &args, DType ab, const void *a,
                         const void *b, DType c, void *out, cudaStream_t stream);

/// The same f32 product with a plain tiled kernel (16 x 16 outputs per block through shared
/// memory), what gemm falls back to where cuBLASLt offers no algorithm. Slow; every output
/// sums its k terms in order.
cudaError_t gemmSimple(const GemmArgs &args, const float *a, const float *b, float *c,
                       cudaStream_t stream);

/// Converts n floats to bf16 (round to nearest even), for the bf16 products' operands.
cudaError_t toBf16(int64_t n, const float *x, __nv_bfloat16 *y, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// 16-bit storage (Convert.cu): `type` is BF16 or F16
//===----------------------------------------------------------------------===//

/// As cpu::widen: y = x, exactly.
cudaError_t widen(DType type, int64_t n, const uint16_t *x, float *y, cudaStream_t stream);
/// As cpu::narrow: y = x rounded to nearest even.
cudaError_t narrow(DType type, int64_t n, const float *x, uint16_t *y, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Embedding (Embedding.cu)
//===----------------------------------------------------------------------===//

/// As cpu::embeddingRows: out[i, :] = table[ids[i] - first, :] where that row is one of the
/// table's `rows` here, a zero row where it is another rank's or the id is negative (a padding
/// slot). An id of vocab or more is recorded in `idError` and gives a zero row.
cudaError_t embedding(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                      ConstFloats table, const int32_t *ids, Floats out, IdError *idError,
                      cudaStream_t stream);
/// Bytes of workspace embeddingGrad needs for n ids and `rows` rows.
size_t embeddingGradWorkspace(int64_t n, int64_t rows);
/// As cpu::embeddingGradRows: dtable = 0, then each row of the table here gets the sum of the
/// dout rows of its ids, added in increasing i in f64 (the CPU's order and precision, so the
/// bits are the CPU's). The positions are grouped by row with a stable radix sort; ids of
/// other ranks' rows are skipped, ids outside [0, vocab) recorded in `idError` and skipped.
cudaError_t embeddingGrad(int64_t n, int64_t rows, int64_t cols, int64_t first, int64_t vocab,
                          ConstFloats dout, const int32_t *ids, Floats dtable, void *workspace,
                          size_t workspaceBytes, IdError *idError, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Rotary embedding (Rope.cu)
//===----------------------------------------------------------------------===//

/// As cpu::rope: [batch, seq, heads, head] in the rotate-half layout; the angles' cosines and
/// sines computed in f64 and rounded once, as the CPU does. `inverse` turns back.
/// With headStart >= 0 the rows' positions are two runs (a head-tail block), with `positions`
/// ([batch, seq], device memory) each row's own, a negative one 0: as cpu::rope's.
cudaError_t rope(int64_t batch, int64_t seq, int64_t heads, int64_t head, float theta, bool inverse,
                 ConstFloats x, Floats y, cudaStream_t stream, int64_t headStart = -1,
                 int64_t tailStart = -1, const kernels::RopeScaling &scaling = {},
                 const int32_t *positions = nullptr);

//===----------------------------------------------------------------------===//
// Attention (Attention.cu)
//===----------------------------------------------------------------------===//

/// The largest head size the attention kernels take.
constexpr int64_t kMaxAttentionHead = 128;

/// As cpu::attention (the same AttentionArgs: causal, sliding window, GQA, a block of query
/// heads): a FlashAttention-2 style kernel in f32, one block per (batch, head, 32 queries),
/// over tiles of 32 keys with an online softmax; the probabilities are never stored. Writes each
/// row's log-sum-exp to `lse` ([batch, seq, heads]) where given.
cudaError_t attention(const AttentionArgs &args, const float *q, const float *k, const float *v,
                      float *out, float *lse, cudaStream_t stream);
/// Floats of workspace attentionGrad needs: per query row, its log-sum-exp and sum(dout * out),
/// and without the forward call's `out` and `lse` (`saved`) the recomputed output.
int64_t attentionGradWorkspace(const AttentionArgs &args, bool saved);
/// As cpu::attentionGrad: from the forward call's `out` and `lse` where given (both or
/// neither), else the forward pass again (output and log-sum-exp); then dk and dv one block per
/// (batch, kv head, 32 keys) over the query heads that read the kv head, and dq one block per
/// (batch, head, 32 queries): no atomics, so the result is the same every run.
cudaError_t attentionGrad(const AttentionArgs &args, const float *q, const float *k, const float *v,
                          const float *dout, const float *out, const float *lse, float *dq,
                          float *dk, float *dv, float *workspace, cudaStream_t stream);

/// The tensor-core attention kernels (FlashAttention.cu): the meaning of attention and
/// attentionGrad on bf16 or f16 q, k, v, dout and outputs of that type, computed with
/// FlashAttention-2's algorithm on mma.sync (f32 accumulation; the probabilities and their
/// gradients rounded to the operand type before their products). They take head sizes 32, 64
/// and 128, causal, sliding-window, GQA and query-head blocks, not head-tail positions
/// (context parallelism), and operands aligned to 16 bytes; flashAttentionTakes says whether
/// the sizes are taken. The forward pass writes each row's log-sum-exp (f32, [batch, seq,
/// heads]) where `lse` is given; the backward pass reads the forward call's `out` and `lse`
/// where given (both or neither) and otherwise computes the forward pass again. It needs
/// flashAttentionGradWorkspaceBytes of workspace and gives the same bits on every run (no
/// atomics).
bool flashAttentionTakes(const AttentionArgs &args);
cudaError_t flashAttention(DType type, const AttentionArgs &args, const uint16_t *q,
                           const uint16_t *k, const uint16_t *v, uint16_t *out, float *lse,
                           cudaStream_t stream);
int64_t flashAttentionGradWorkspaceBytes(const AttentionArgs &args, bool saved);
cudaError_t flashAttentionGrad(DType type, const AttentionArgs &args, const uint16_t *q,
                               const uint16_t *k, const uint16_t *v, const uint16_t *dout,
                               const uint16_t *out, const float *lse, uint16_t *dq, uint16_t *dk,
                               uint16_t *dv, void *workspace, cudaStream_t stream);

/// One step of ring attention, as cpu::attentionBlock: `args` places the queries and the
/// block's keys in the whole sequence as head-tail blocks (headStart/tailStart and
/// keyHeadStart/keyTailStart, both set; kvSeq = seq). The block's attention and log-sum-exp
/// are computed by the attention kernel into the workspace, then merged into the running out
/// [batch, seq, heads, head] and lse [batch, seq, heads], which `first` starts at 0 and -inf.
int64_t attentionBlockWorkspace(const AttentionArgs &args);
cudaError_t attentionBlock(const AttentionArgs &args, const float *q, const float *k,
                           const float *v, bool first, float *out, float *lse, float *workspace,
                           cudaStream_t stream);
/// One step of ring attention's backward pass, as cpu::attentionBlockGrad: from the whole
/// attention's out and lse, adds the block's terms into dq, dk and dv (zeroed first when
/// `first`) with the attention gradient kernels.
int64_t attentionBlockGradWorkspace(const AttentionArgs &args);
cudaError_t attentionBlockGrad(const AttentionArgs &args, const float *q, const float *k,
                               const float *v, const float *dout, const float *out,
                               const float *lse, bool first, float *dq, float *dk, float *dv,
                               float *workspace, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Attention over paged key/value caches (PagedAttention.cu)
//===----------------------------------------------------------------------===//

/// Floats of workspace pagedAttention needs: the parts' partial results where the positions a
/// token sees are split over several blocks; 0 where they are not. Bounded by the sizes (about
/// a thousand parts of head + 2 floats at most), not by the caches' length.
int64_t pagedAttentionWorkspace(const PagedAttentionArgs &args);
/// As cpu::pagedAttention: stores the new tokens' keys and values in the caches, then each
/// token's attention over its sequence's positions, split over the positions ("flash
/// decoding": parts computed by separate blocks, merged by their maxima), with an online
/// softmax in f32. Each operand is read and written at its own type; heads of at most
/// kMaxAttentionHead. Padding tokens and those reaching blocks out of range get zero rows, and
/// no read or write leaves the caches. `workspace` holds pagedAttentionWorkspace(args) floats.
cudaError_t pagedAttention(const PagedAttentionArgs &args, ConstFloats q, ConstFloats k,
                           ConstFloats v, const int32_t *positions, const int32_t *blockTable,
                           Floats out, Floats kCache, Floats vCache, float *workspace,
                           cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Running sums of the decode programs (RunningSum.cu)
//===----------------------------------------------------------------------===//

/// As cpu::runningSum, each sum in the CPU's order (so with its bits).
cudaError_t runningSum(const RunningSumArgs &args, const float *x, const int32_t *positions,
                       const int32_t *blockTable, float *y, float *totals, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Reductions, buckets, dropout (Reduce.cu, Dropout.cu)
//===----------------------------------------------------------------------===//

/// As cpu::reduceSum: out[i . so] = scale * the sum of x over the dims where `so` is 0, each
/// output summing its inputs in the CPU's order and precision (f64, in runs of
/// kReduceRun terms), so with the CPU's bits. With `accumulate` the scaled sum (rounded to
/// f32) is added to out, as the CPU does. With `workspace` (reduceSumWorkspaceBytes of it,
/// 8-byte aligned) an output's runs are summed in parallel; without, one thread sums each
/// output (the same bits, slower where outputs are few and long).
cudaError_t reduceSum(const Shape &shape, ConstFloats x, const Strides &so, float scale, Floats out,
                      cudaStream_t stream, bool accumulate = false, void *workspace = nullptr);
/// The workspace reduceSum takes to sum runs in parallel: 0 where every output is one run.
int64_t reduceSumWorkspaceBytes(const Shape &shape, const Strides &so);

/// As cpu::pack, one launch per input.
cudaError_t pack(int64_t count, const float *const *inputs, const int64_t *outers,
                 const int64_t *chunks, int64_t ways, float *y, cudaStream_t stream);

/// As cpu::dropoutBlock (the same counter-based generator, so the same mask as the CPU).
/// Shapes of at most kMaxRank dims.
cudaError_t dropoutBlock(const std::vector<int64_t> &shape, const std::vector<int64_t> &offset,
                         const std::vector<int64_t> &tail, const std::vector<int64_t> &wholeShape,
                         float rate, uint64_t seed, const float *x, float *y, cudaStream_t stream);

/// Doubles of workspace sumOfSquares needs for `count` inputs of `sizes` elements.
int64_t sumOfSquaresWorkspace(int64_t count, const int64_t *sizes);
/// out[0] = the sum of squares of every element of every input (its square root with
/// `root`): in f64, each chunk of each input over a fixed tree, then the chunks' sums.
cudaError_t sumOfSquares(int64_t count, const float *const *inputs, const int64_t *sizes, bool root,
                         float *out, double *workspace, cudaStream_t stream);
/// *flag = 1 if any element of x (n elements) is not finite; the flag is only ever set.
cudaError_t findNonFinite(int64_t n, const float *x, int *flag, cudaStream_t stream);
/// c[0] = min(1, max / (norm[0] + 1e-6)) in f32, as the CPU's clip_coefficient.
cudaError_t clipCoefficient(const float *norm, float max, float *c, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Fused elementwise (FusedElementwise.cu)
//===----------------------------------------------------------------------===//

/// The most steps, inputs and outputs a fused body may have on the GPU (a kernel parameter
/// holds the whole program).
constexpr int kMaxFusedSteps = 48;
constexpr int kMaxFusedInputs = 12;
constexpr int kMaxFusedOutputs = 6;

/// As cpu::fusedElementwise: each element runs the steps in order, each as its unfused kernel
/// computes (the same device functions), so the values are those of the unfused CUDA kernels.
/// The body is interpreted per element; the CUDA device runs this where it has no kernel generated
/// for the body at plan load (FusedSource.h).
cudaError_t fusedElementwise(const Shape &shape, const std::vector<FusedStep> &steps,
                             const std::vector<const float *> &inputs,
                             const std::vector<Strides> &inStrides,
                             const std::vector<float *> &outputs,
                             const std::vector<int32_t> &outSteps, cudaStream_t stream);

} // namespace tessel::cuda

#endif // TESSEL_KERNELS_CUDA_CUDAKERNELS_H
