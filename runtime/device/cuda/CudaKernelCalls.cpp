//===- CudaKernelCalls.cpp - Plan kernels on the CUDA backend -------------===//
//
// One handler per plan kernel the CUDA backend runs so far: the same operand checks as
// device/cpu/CpuKernelCalls.cpp (docs/plan-format.md lists the parameters), then a launch of
// kernels/cuda on the stream of the launch in progress (CudaLaunch.h). A kernel without a
// handler here is refused when a plan is loaded (CudaDevice::kernel).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CollectiveCalls.h"
#include "runtime/device/Device.h"
#include "runtime/device/KernelOperands.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FusedSource.h"

#include <cmath>
#include <optional>
#include <vector>

namespace tessel::rt {

namespace {

// The catalogue's operation words and the kernels' kinds list the same operations in the same
// order, so one converts to the other by value.
static_assert(static_cast<int>(catalogue::UnaryOp::GeluErf) ==
              static_cast<int>(cuda::UnaryKind::GeluErf));
static_assert(static_cast<int>(catalogue::UnaryOp::Pow) == static_cast<int>(cuda::UnaryKind::Pow));
static_assert(static_cast<int>(catalogue::UnaryOp::Gelu) ==
              static_cast<int>(cuda::UnaryKind::Gelu));
static_assert(static_cast<int>(catalogue::BinaryOp::Ne) == static_cast<int>(cuda::BinaryKind::Ne));
static_assert(static_cast<int>(catalogue::BinaryOp::Div) ==
              static_cast<int>(cuda::BinaryKind::Div));
static_assert(static_cast<int>(catalogue::BinaryOp::Lt) == static_cast<int>(cuda::BinaryKind::Lt));

static_assert(static_cast<int>(catalogue::BodyStep::Kind::Where) ==
              static_cast<int>(cuda::FusedStep::Kind::Where));
static_assert(static_cast<int>(catalogue::BodyStep::Kind::UnaryGrad) ==
              static_cast<int>(cuda::FusedStep::Kind::UnaryGrad));

cuda::UnaryKind unaryKind(catalogue::UnaryOp op) { return static_cast<cuda::UnaryKind>(op); }
cuda::BinaryKind binaryKind(catalogue::BinaryOp op) { return static_cast<cuda::BinaryKind>(op); }

/// The end of a handler: the launch's error as the call's.
bool launched(KernelCall &c, cudaError_t e) {
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("CUDA launch failed: ") + cudaGetErrorString(e));
}

cudaStream_t stream() { return currentCudaLaunch()->stream(); }

/// Input k of a handler that reads its float operands at their own types (cudaSixteenBitKernel
/// sends it the calls with 16-bit ones): the plan's type, f32 for a call made without a plan
/// instruction.
cuda::ConstFloats typedIn(KernelCall &c, size_t k) {
  return {c.in[k], c.instr ? elementTypeOf(c.instr->inputs[k].dtype) : cuda::ElementType::F32};
}
/// Output k of such a handler.
cuda::Floats typedOut(KernelCall &c, size_t k) {
  return {c.out[k], c.instr ? elementTypeOf(c.instr->outputs[k].dtype) : cuda::ElementType::F32};
}

bool run(KernelCall &c, const catalogue::Fill &p) {
  if (!c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::fill(p.n, static_cast<float>(p.value), typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::Positions &p) {
  if (!c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::positions(p.n, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Binary &p) {
  const auto &sizes = p.shape;
  cuda::Shape shape;
  cuda::Strides a, b;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.a_strides, sizes.size(), a) ||
      !toStrides(c, p.b_strides, sizes.size(), b))
    return false;
  if (!c.needIn(0, reach(sizes, p.a_strides)) || !c.needIn(1, reach(sizes, p.b_strides)) ||
      !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  return launched(c, cuda::binary(binaryKind(p.op), shape, typedIn(c, 0), a, typedIn(c, 1), b,
                                  typedOut(c, 0), stream()));
}

/// pow's exponent, which it requires; 0 for the functions that have none.
bool exponentOf(KernelCall &c, catalogue::UnaryOp op, const std::optional<double> &exponent,
                float &out) {
  out = static_cast<float>(exponent.value_or(0.0));
  if (op == catalogue::UnaryOp::Pow && !exponent)
    return c.fail("pow needs an exponent");
  return true;
}

bool run(KernelCall &c, const catalogue::Unary &p) {
  float exponent = 0.0f;
  if (!exponentOf(c, p.op, p.exponent, exponent) || !c.needIn(0, p.n) || !c.needOut(0, p.n) ||
      c.validating)
    return c.error.empty();
  return launched(
      c, cuda::unary(unaryKind(p.op), p.n, typedIn(c, 0), typedOut(c, 0), exponent, stream()));
}

bool run(KernelCall &c, const catalogue::UnaryGrad &p) {
  float exponent = 0.0f;
  if (!exponentOf(c, p.op, p.exponent, exponent) || !c.needIn(0, p.n) || !c.needIn(1, p.n) ||
      !c.needIn(2, p.n) || !c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::unaryGrad(unaryKind(p.op), p.n, typedIn(c, 0), typedIn(c, 1),
                                     typedIn(c, 2), typedOut(c, 0), exponent, stream()));
}

bool run(KernelCall &c, const catalogue::Where &p) {
  const auto &sizes = p.shape;
  cuda::Shape shape;
  cuda::Strides sc, sa, sb;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.cond_strides, sizes.size(), sc) ||
      !toStrides(c, p.a_strides, sizes.size(), sa) || !toStrides(c, p.b_strides, sizes.size(), sb))
    return false;
  if (!c.needIn(0, reach(sizes, p.cond_strides)) || !c.needIn(1, reach(sizes, p.a_strides)) ||
      !c.needIn(2, reach(sizes, p.b_strides)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  return launched(c, cuda::select(shape, typedIn(c, 0), sc, typedIn(c, 1), sa, typedIn(c, 2), sb,
                                  typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::Copy &p) {
  const auto &sizes = p.shape;
  cuda::Shape shape;
  cuda::Strides x;
  if (!toShape(c, sizes, shape) || !toStrides(c, p.x_strides, sizes.size(), x) ||
      !c.needIn(0, reach(sizes, p.x_strides)) || !c.needOut(0, product(sizes)) || c.validating)
    return c.error.empty();
  // Between buffers of one 16-bit type the copy moves bits; between types it converts.
  return launched(c, cuda::stridedCopy(shape, typedIn(c, 0), x, typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::Accumulate &p) {
  if (!c.needIn(0, p.n) || !c.needOut(0, p.n) || c.validating)
    return c.error.empty();
  if (p.n == 0)
    return true;
  cuda::Shape shape;
  shape.rank = 1;
  shape.size[0] = p.n;
  const cuda::Strides dense = cpu::denseStrides(shape);
  return launched(c, cuda::binary(cuda::BinaryKind::Add, shape, typedOut(c, 0), dense,
                                  typedIn(c, 0), dense, typedOut(c, 0), stream()));
}

/// `floats` f32 elements of the launch's scratch memory; null with the call's error.
float *scratchFloats(KernelCall &c, int64_t floats) {
  std::string why;
  void *p = currentCudaLaunch()->scratch(static_cast<uint64_t>(floats) * sizeof(float), why);
  if (!p)
    c.fail("scratch memory: " + why);
  return static_cast<float *>(p);
}

bool run(KernelCall &c, const catalogue::Softmax &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needOut(0, rows * cols) ||
      c.validating)
    return c.error.empty();
  return launched(c, cuda::softmax(rows, cols, typedIn(c, 0), typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::SoftmaxGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, rows * cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(
      c, cuda::softmaxGrad(rows, cols, typedIn(c, 0), typedIn(c, 1), typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::TopKMask &p) {
  int64_t rows, cols;
  if (!topKMaskArgs(c, p, rows, cols))
    return false;
  return c.validating ||
         launched(c, cuda::topKMask(rows, cols, p.k, c.fin(0), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::LayerNorm &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, cols) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::layerNorm(rows, cols, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                     static_cast<float>(p.eps), typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::LayerNormGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) || !c.needOut(1, cols) ||
      !c.needOut(2, cols) || c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::normGradWorkspace(rows));
  if (!workspace)
    return false;
  return launched(c, cuda::layerNormGrad(rows, cols, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                         static_cast<float>(p.eps), typedOut(c, 0), typedOut(c, 1),
                                         typedOut(c, 2), workspace, stream()));
}

bool run(KernelCall &c, const catalogue::RmsNorm &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::rmsNorm(rows, cols, typedIn(c, 0), typedIn(c, 1),
                                   static_cast<float>(p.eps), typedOut(c, 0), stream()));
}

bool run(KernelCall &c, const catalogue::RmsNormGrad &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needIn(1, cols) ||
      !c.needIn(2, rows * cols) || !c.needOut(0, rows * cols) || !c.needOut(1, cols) ||
      c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::normGradWorkspace(rows));
  if (!workspace)
    return false;
  return launched(c, cuda::rmsNormGrad(rows, cols, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                       static_cast<float>(p.eps), typedOut(c, 0), typedOut(c, 1),
                                       workspace, stream()));
}

/// The optional `scale` of a loss: absent, the loss is the mean over rows.
template <class P> bool lossScale(KernelCall &c, const P &p, bool &scaled, double &scale) {
  scaled = p.scale.has_value();
  scale = p.scale.value_or(0.0);
  if (scaled && !std::isfinite(scale))
    return c.fail("has a non-finite scale");
  return true;
}

bool run(KernelCall &c, const catalogue::CrossEntropy &p) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, p, rows, cols) || !lossScale(c, p, scaled, scale) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::crossEntropyWorkspace(rows));
  if (!workspace)
    return false;
  return launched(c,
                  cuda::crossEntropy(rows, cols, typedIn(c, 0), c.ids(1), scaled, scale, c.fout(0),
                                     workspace, currentCudaLaunch()->idError(), stream()));
}

bool run(KernelCall &c, const catalogue::CrossEntropyGrad &p) {
  int64_t rows, cols;
  bool scaled;
  double scale;
  if (!rowsCols(c, p, rows, cols) || !lossScale(c, p, scaled, scale) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needIn(2, 1) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::crossEntropyGrad(rows, cols, typedIn(c, 0), c.ids(1), c.fin(2), scaled,
                                            scale, typedOut(c, 0), currentCudaLaunch()->idError(),
                                            stream()));
}

bool run(KernelCall &c, const catalogue::AdamW &p) {
  // Tensor t of k: grad[t], then lr and c; param[t], m[t], v[t] and working[t].
  const size_t k = p.n.size();
  bool working = false;
  if (!c.needTensors(p.n, 1, 3, 1, &working) || c.validating)
    return c.error.empty();
  cuda::AdamWArgs a;
  a.beta1 = static_cast<float>(p.beta1);
  a.beta2 = static_cast<float>(p.beta2);
  a.eps = static_cast<float>(p.eps);
  a.weightDecay = static_cast<float>(p.weight_decay);
  a.step = c.ctx->step;
  a.lr = c.fin(k);
  a.gradScale = c.fin(k + 1);
  // The working copies, written by the same pass in their own type (the sixteen-bit table
  // below sends 16-bit ones here, not through the widening wrapper); the catalogue gives
  // every working copy of a call one type.
  if (working) {
    a.workingType = elementTypeOf(c.instr->outputs[3 * k].dtype);
  }
  std::vector<cuda::AdamWTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {p.n[t],        c.fout(t),         c.fin(t),
                  c.fout(k + t), c.fout(2 * k + t), working ? c.out[3 * k + t] : nullptr};
  return launched(c, cuda::adamw(a, tensors.data(), k, stream()));
}

/// The end of a product's handler: cuBLASLt's status as the call's error.
bool multiplied(KernelCall &c, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  return c.fail(std::string("cuBLASLt product failed: ") +
                currentCudaLaunch()->blas().lt->cublasLtGetStatusString(s));
}

/// `bytes` of the launch's scratch memory; null with the call's error.
void *scratchBytes(KernelCall &c, uint64_t bytes) {
  std::string why;
  void *p = currentCudaLaunch()->scratch(bytes, why);
  if (!p)
    c.fail("scratch memory: " + why);
  return p;
}

bool run(KernelCall &c, const catalogue::Gemm &p) {
  GemmCalls calls;
  if (!gemmCalls(c, p, calls))
    return c.error.empty();
  const cuda::BlasContext &blas = currentCudaLaunch()->blas();
  for (const auto &[a, b, out] : calls.offsets)
    if (!multiplied(
            c, cuda::gemm(blas, calls.args, c.fin(0) + a, c.fin(1) + b, c.fout(0) + out, stream())))
      return false;
  return true;
}

bool run(KernelCall &c, const catalogue::Embedding &p) {
  int64_t n = p.n, rows = p.rows, cols = p.cols, first, vocab;
  if (!blockOfDim(c, p.row_group ? &*p.row_group : nullptr, rows, first, vocab) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, n) || !c.needOut(0, n * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::embedding(n, rows, cols, first, vocab, typedIn(c, 0), c.ids(1),
                                     typedOut(c, 0), currentCudaLaunch()->idError(), stream()));
}

bool run(KernelCall &c, const catalogue::EmbeddingGrad &p) {
  int64_t n = p.n, rows = p.rows, cols = p.cols, first, vocab;
  if (!blockOfDim(c, p.row_group ? &*p.row_group : nullptr, rows, first, vocab) ||
      !c.needIn(0, n * cols) || !c.needIn(1, n) || !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  const size_t bytes = cuda::embeddingGradWorkspace(n, rows);
  void *workspace = scratchBytes(c, bytes);
  if (!workspace)
    return false;
  return launched(c, cuda::embeddingGrad(n, rows, cols, first, vocab, typedIn(c, 0), c.ids(1),
                                         typedOut(c, 0), workspace, bytes,
                                         currentCudaLaunch()->idError(), stream()));
}

bool run(KernelCall &c, const catalogue::Rope &p) {
  const int64_t n = p.batch * p.seq * p.heads * p.head;
  if (p.head % 2 != 0 || p.batch <= 0 || p.seq <= 0 || p.heads <= 0 || p.head <= 0)
    return c.fail("needs positive sizes and an even head size");
  int64_t headStart = -1, tailStart = -1;
  if (!ropePositions(c, p, headStart, tailStart))
    return false;
  if (!c.needIn(0, n) || !c.needOut(0, n) || c.validating)
    return c.error.empty();
  return launched(c, cuda::rope(p.batch, p.seq, p.heads, p.head, static_cast<float>(p.theta),
                                p.inverse != 0, typedIn(c, 0), typedOut(c, 0), stream(), headStart,
                                tailStart));
}

/// The attention sizes the CUDA kernels take beyond the CPU's: a head of at most
/// kMaxAttentionHead.
template <class P> bool cudaAttentionArgs(KernelCall &c, const P &p, cuda::AttentionArgs &a) {
  if (!attentionArgs(c, p, a))
    return false;
  if (a.head > cuda::kMaxAttentionHead)
    return c.fail("has head size " + std::to_string(a.head) + "; the cuda attention kernels take " +
                  "at most " + std::to_string(cuda::kMaxAttentionHead));
  return true;
}

bool run(KernelCall &c, const catalogue::Attention &p) {
  cuda::AttentionArgs a;
  if (!cudaAttentionArgs(c, p, a))
    return false;
  const int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needOut(0, q) || c.validating)
    return c.error.empty();
  return launched(c, cuda::attention(a, c.fin(0), c.fin(1), c.fin(2), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::AttentionGrad &p) {
  cuda::AttentionArgs a;
  if (!cudaAttentionArgs(c, p, a))
    return false;
  const int64_t q = a.batch * a.seq * a.heads * a.head, kv = a.batch * a.kvSeq * a.kvHeads * a.head;
  if (!c.needIn(0, q) || !c.needIn(1, kv) || !c.needIn(2, kv) || !c.needIn(3, q) ||
      !c.needOut(0, q) || !c.needOut(1, kv) || !c.needOut(2, kv) || c.validating)
    return c.error.empty();
  float *workspace = scratchFloats(c, cuda::attentionGradWorkspace(a));
  if (!workspace)
    return false;
  return launched(c, cuda::attentionGrad(a, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fout(0),
                                         c.fout(1), c.fout(2), workspace, stream()));
}

/// A ring step's sizes, with its query and key blocks placed in the whole sequence, and the
/// CUDA kernels' head limit.
template <class P> bool cudaRingArgs(KernelCall &c, const P &p, cpu::RingBlockArgs &r) {
  if (!ringBlockArgs(c, p, r))
    return false;
  if (r.attention.head > cuda::kMaxAttentionHead)
    return c.fail("has head size " + std::to_string(r.attention.head) +
                  "; the cuda attention kernels take at most " +
                  std::to_string(cuda::kMaxAttentionHead));
  placeRingBlocks(r);
  return true;
}

bool run(KernelCall &c, const catalogue::AttentionBlock &p) {
  cpu::RingBlockArgs r;
  if (!cudaRingArgs(c, p, r) || !needRingOperands(c, r, false) || c.validating)
    return c.error.empty();
  const cuda::AttentionArgs &a = r.attention;
  float *workspace = scratchFloats(c, cuda::attentionBlockWorkspace(a));
  return workspace && launched(c, cuda::attentionBlock(a, c.fin(0), c.fin(1), c.fin(2), p.step == 0,
                                                       c.fout(0), c.fout(1), workspace, stream()));
}

bool run(KernelCall &c, const catalogue::AttentionBlockGrad &p) {
  cpu::RingBlockArgs r;
  if (!cudaRingArgs(c, p, r) || !needRingOperands(c, r, true) || c.validating)
    return c.error.empty();
  const cuda::AttentionArgs &a = r.attention;
  float *workspace = scratchFloats(c, cuda::attentionBlockGradWorkspace(a));
  return workspace &&
         launched(c, cuda::attentionBlockGrad(a, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fin(4),
                                              c.fin(5), p.step == 0, c.fout(0), c.fout(1),
                                              c.fout(2), workspace, stream()));
}

bool run(KernelCall &c, const catalogue::Reduce &p) {
  const auto &sizes = p.shape, &sy = p.y_strides;
  cuda::Shape shape;
  cuda::Strides y;
  if (!toShape(c, sizes, shape) || !toStrides(c, sy, sizes.size(), y) ||
      !c.needIn(0, product(sizes)) || !c.needOut(0, p.y_elements) ||
      !c.needOut(0, reach(sizes, sy)) || c.validating)
    return c.error.empty();
  // The runs of long sums (a bias gradient's rows) in parallel, in scratch memory.
  const int64_t workspaceBytes = cuda::reduceSumWorkspaceBytes(shape, y);
  float *workspace = nullptr;
  if (workspaceBytes > 0 && !(workspace = scratchFloats(c, (workspaceBytes + 3) / 4)))
    return false;
  return launched(c, cuda::reduceSum(shape, typedIn(c, 0), y, static_cast<float>(p.scale),
                                     typedOut(c, 0), stream(), p.accumulate.value_or(false),
                                     workspace));
}

bool run(KernelCall &c, const catalogue::Pack &p) {
  std::vector<const float *> inputs;
  if (!packInputs(c, p, inputs))
    return c.error.empty();
  return launched(c, cuda::pack(static_cast<int64_t>(inputs.size()), inputs.data(), p.outers.data(),
                                p.chunks.data(), p.ways, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Dropout &p) {
  std::vector<int64_t> offset, tail, whole;
  int64_t n = 0;
  if (!dropoutBlock(c, p, offset, tail, whole, n))
    return false;
  if (p.shape.size() > static_cast<size_t>(cuda::kMaxRank))
    return c.fail("has rank " + std::to_string(p.shape.size()) + "; at most " +
                  std::to_string(cuda::kMaxRank) + " is supported");
  if (c.validating)
    return true;
  return launched(c, cuda::dropoutBlock(p.shape, offset, tail, whole, static_cast<float>(p.rate),
                                        dropoutSeed(c, p.mask), c.fin(0), c.fout(0), stream()));
}

/// Runs a fused call on the kernel generated for it at plan load.
bool launchGenerated(KernelCall &c, const FusedCall &f, cudaKernel_t generated) {
  cuda::FusedKernelArgs args;
  if (!cuda::fusedKernelArgs(f.shape, f.strides, f.ins, f.outs, args))
    return c.fail("has more inputs or outputs than a generated kernel takes");
  return launched(c, cuda::launchFusedKernel(generated, f.shape, args, stream()));
}

/// A fused elementwise body interpreted on the device (FusedElementwise.cu); the same checks
/// as the CPU handler, and the GPU interpreter's limits on steps, inputs and outputs.
bool run(KernelCall &c, const catalogue::FusedElementwise &p) {
  if (p.body.steps.size() > static_cast<size_t>(cuda::kMaxFusedSteps) ||
      c.in.size() > static_cast<size_t>(cuda::kMaxFusedInputs) ||
      c.out.size() > static_cast<size_t>(cuda::kMaxFusedOutputs))
    return c.fail("has " + std::to_string(p.body.steps.size()) + " steps, " +
                  std::to_string(c.in.size()) + " inputs and " + std::to_string(c.out.size()) +
                  " outputs; the cuda device runs at most " + std::to_string(cuda::kMaxFusedSteps) +
                  ", " + std::to_string(cuda::kMaxFusedInputs) + " and " +
                  std::to_string(cuda::kMaxFusedOutputs) + " (compile with --fuse=off)");
  FusedCall f;
  if (!fusedCall(c, p, f))
    return c.error.empty();
  // The kernel generated for this call at plan load (CudaDevice::prepare), else the
  // interpreter. A call with 16-bit operands comes here only between widening copies (its
  // generated kernel, made for its types, runs from fusedHalfCall), so it takes the
  // interpreter.
  const bool widened = hasHalfOperand(f.inTypes) || hasHalfOperand(f.outTypes);
  if (cudaKernel_t generated = widened ? nullptr : currentCudaLaunch()->fusedKernel(c.instr))
    return launchGenerated(c, f, generated);
  return launched(
      c, cuda::fusedElementwise(f.shape, f.steps, f.ins, f.strides, f.outs, f.outSteps, stream()));
}

/// global_norm and sum_squares: the sum of squares of every input, in input order.
bool sumOfSquares(KernelCall &c, bool root) {
  if (c.in.empty())
    return c.fail("needs at least one input");
  if (!c.needOut(0, 1) || c.validating)
    return c.error.empty();
  std::vector<const float *> inputs;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < c.in.size(); ++k) {
    inputs.push_back(c.fin(k));
    sizes.push_back(static_cast<int64_t>(c.inElements[k]));
  }
  const int64_t count = static_cast<int64_t>(inputs.size());
  auto *workspace = static_cast<double *>(
      scratchBytes(c, static_cast<uint64_t>(cuda::sumOfSquaresWorkspace(count)) * sizeof(double)));
  if (!workspace)
    return false;
  return launched(c, cuda::sumOfSquares(count, inputs.data(), sizes.data(), root, c.fout(0),
                                        workspace, stream()));
}

bool run(KernelCall &c, const catalogue::GlobalNorm &) { return sumOfSquares(c, true); }
bool run(KernelCall &c, const catalogue::SumSquares &) { return sumOfSquares(c, false); }

/// Ends the program when an input holds a value that is not finite. The executor decides
/// before it launches the next kernel, so this waits for the stream: one synchronisation per
/// step, where the plan checks the reduced gradient norm.
bool run(KernelCall &c, const catalogue::GuardFinite &) {
  if (c.validating)
    return true;
  auto *flag = static_cast<int *>(scratchBytes(c, sizeof(int)));
  if (!flag)
    return false;
  if (!launched(c, cudaMemsetAsync(flag, 0, sizeof(int), stream())))
    return false;
  for (size_t k = 0; k < c.in.size(); ++k)
    if (!launched(c, cuda::findNonFinite(static_cast<int64_t>(c.inElements[k]), c.fin(k), flag,
                                         stream())))
      return false;
  int found = 0;
  if (!launched(c, cudaMemcpyAsync(&found, flag, sizeof found, cudaMemcpyDeviceToHost, stream())) ||
      !launched(c, cudaStreamSynchronize(stream())))
    return false;
  c.stop = found != 0;
  return true;
}

bool run(KernelCall &c, const catalogue::ClipCoefficient &p) {
  if (!c.needIn(0, 1) || !c.needOut(0, 1) || c.validating)
    return c.error.empty();
  return launched(c,
                  cuda::clipCoefficient(c.fin(0), static_cast<float>(p.max), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::LearningRate &p) {
  if (!c.needOut(0, 1) || c.validating)
    return c.error.empty();
  // A function of the step alone: computed here, as on the CPU, and written by a fill.
  return launched(c, cuda::fill(1, static_cast<float>(scheduledLearningRate(p, c.ctx->step)),
                                c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::ShardSlice &p) {
  const int64_t outer = p.outer, chunk = p.chunk;
  const CommGroup *g = c.group(p.group);
  if (!g)
    return false;
  if (outer <= 0 || chunk <= 0)
    return c.fail("has a non-positive outer or chunk size");
  const int64_t ways = g->size();
  if (!c.needIn(0, outer * ways * chunk) || !c.needOut(0, outer * chunk) || c.validating)
    return c.error.empty();
  cuda::Shape shape;
  cuda::Strides x;
  int64_t offset = 0;
  if (!shardSliceView(c, p, *g, shape, x, offset))
    return false;
  return launched(c, cuda::stridedCopy(shape, c.fin(0) + offset, x, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::Sgd &p) {
  // Tensor t of k: grad[t], then lr and c; param[t] and momentum[t].
  const size_t k = p.n.size();
  if (!c.needTensors(p.n, 1, 2) || c.validating)
    return c.error.empty();
  cuda::SgdArgs a;
  a.momentum = static_cast<float>(p.momentum);
  a.weightDecay = static_cast<float>(p.weight_decay);
  a.lr = c.fin(k);
  a.gradScale = c.fin(k + 1);
  std::vector<cuda::SgdTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {p.n[t], c.fout(t), c.fin(t), c.fout(k + t)};
  return launched(c, cuda::sgd(a, tensors.data(), k, stream()));
}

bool run(KernelCall &c, const catalogue::CeMax &p) {
  int64_t rows, cols;
  if (!rowsCols(c, p, rows, cols) || !c.needIn(0, rows * cols) || !c.needOut(0, rows) ||
      c.validating)
    return c.error.empty();
  return launched(c, cuda::ceMax(rows, cols, c.fin(0), c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::CeSums &p) {
  int64_t rows, cols, first, classes;
  if (!rowsCols(c, p, rows, cols) || !blockOfDim(c, &p.col_group, cols, first, classes) ||
      !c.needIn(0, rows * cols) || !c.needIn(1, rows) || !c.needIn(2, rows) ||
      !c.needOut(0, rows) || !c.needOut(1, rows) || c.validating)
    return c.error.empty();
  return launched(c, cuda::ceSums(rows, cols, first, classes, c.fin(0), c.ids(1), c.fin(2),
                                  c.fout(0), c.fout(1), currentCudaLaunch()->idError(), stream()));
}

bool run(KernelCall &c, const catalogue::CeLoss &p) {
  const int64_t rows = p.rows;
  if (rows <= 0 || !std::isfinite(p.scale))
    return c.fail("needs positive rows and a finite scale");
  if (!c.needIn(0, rows) || !c.needIn(1, rows) || !c.needIn(2, rows) || !c.needOut(0, 1) ||
      c.validating)
    return c.error.empty();
  return launched(c,
                  cuda::ceLoss(rows, c.fin(0), c.fin(1), c.fin(2), p.scale, c.fout(0), stream()));
}

bool run(KernelCall &c, const catalogue::CeGrad &p) {
  int64_t rows, cols, first, classes;
  if (!rowsCols(c, p, rows, cols))
    return false;
  if (!std::isfinite(p.scale))
    return c.fail("has a non-finite scale");
  if (!blockOfDim(c, &p.col_group, cols, first, classes) || !c.needIn(0, rows * cols) ||
      !c.needIn(1, rows) || !c.needIn(2, rows) || !c.needIn(3, rows) || !c.needIn(4, 1) ||
      !c.needOut(0, rows * cols) || c.validating)
    return c.error.empty();
  return launched(c, cuda::ceGrad(rows, cols, first, classes, c.fin(0), c.ids(1), c.fin(2),
                                  c.fin(3), c.fin(4), p.scale, c.fout(0),
                                  currentCudaLaunch()->idError(), stream()));
}

/// Calls the handler of the kernel whose parameters are P.
template <class P> bool dispatch(KernelCall &c, const catalogue::KernelParams &params) {
  return run(c, *std::get_if<P>(&params));
}

/// Orders a collective's work after the kernels launched before it on this launch's stream,
/// which write its input. A communicator that enqueues on a GPU stream (NCCL) waits for them
/// there, and so does this thread's stream, on which the kernel's own copies go (a group of
/// one, a head-tail reordering; CudaCommMemory). Otherwise, ranks as threads, the host waits
/// for them: the communicator's copies are issued by another thread.
bool orderCollective(KernelCall &c) {
  cudaStream_t s = stream();
  cudaError_t e;
  if (c.comm && c.comm->orderAfter(s)) {
    cudaEvent_t ready = currentCudaLaunch()->collectiveEvent();
    e = cudaEventRecord(ready, s);
    if (e == cudaSuccess)
      e = cudaStreamWaitEvent(cudaStreamPerThread, ready, 0);
  } else {
    e = cudaStreamSynchronize(s);
  }
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("waiting for the kernels before it failed: ") + cudaGetErrorName(e) +
                ": " + cudaGetErrorString(e));
}

/// A collective or transfer: the handler every device shares (comm/CollectiveCalls.h), after
/// the kernels that write its input.
template <class P> bool collective(KernelCall &c, const catalogue::KernelParams &params) {
  if (!c.validating && !orderCollective(c))
    return false;
  return rt::run(c, *std::get_if<P>(&params));
}

/// `wait`: the shared handler. The operation it ends wrote its output before the host learns it
/// is done, so the kernels after it, launched later, see it.
bool waitFor(KernelCall &c, const catalogue::KernelParams &params) {
  return rt::run(c, *std::get_if<catalogue::Wait>(&params));
}

/// gemm with 16-bit a and b, into an f32 c (a weight's gradient under mixed precision) or a c
/// of their type (an activation): cuBLASLt's 16-bit product with f32 accumulation, no widening
/// copies. The offsets gemmCalls gives count elements; each operand's apply at its own width.
bool gemmMixedCall(KernelCall &c, const catalogue::KernelParams &params) {
  GemmCalls calls;
  if (!gemmCalls(c, *std::get_if<catalogue::Gemm>(&params), calls))
    return c.error.empty();
  const cuda::BlasContext &blas = currentCudaLaunch()->blas();
  const planfile::DType abType = c.instr->inputs[0].dtype, outType = c.instr->outputs[0].dtype;
  const size_t abBytes = planfile::dtypeBytes(abType), outBytes = planfile::dtypeBytes(outType);
  const auto *a = static_cast<const char *>(c.in[0]);
  const auto *b = static_cast<const char *>(c.in[1]);
  auto *out = static_cast<char *>(c.out[0]);
  for (const auto &[ao, bo, co] : calls.offsets)
    if (!multiplied(c,
                    cuda::gemmMixed(blas, calls.args, elementTypeOf(abType),
                                    a + static_cast<size_t>(ao) * abBytes,
                                    b + static_cast<size_t>(bo) * abBytes, elementTypeOf(outType),
                                    out + static_cast<size_t>(co) * outBytes, stream())))
      return false;
  return true;
}

/// fused_elementwise with 16-bit operands: the kernel generated for the call's types loads and
/// stores them itself; where none was loaded (no NVRTC), the interpreter between widening
/// copies.
bool fusedHalfCall(KernelCall &c, const catalogue::KernelParams &params) {
  if (!c.validating)
    if (cudaKernel_t generated = currentCudaLaunch()->fusedKernel(c.instr)) {
      FusedCall f;
      if (!fusedCall(c, std::get<catalogue::FusedElementwise>(params), f))
        return c.error.empty();
      return launchGenerated(c, f, generated);
    }
  return cudaWidenedCall(c, params);
}

} // namespace

KernelFn cudaSixteenBitKernel(catalogue::KernelId id, const std::vector<planfile::DType> &ins,
                              const std::vector<planfile::DType> &outs) {
  using planfile::DType;
  // A product of two 16-bit operands of one type, into f32 or that type: the tensor cores.
  if (id == catalogue::KernelId::Gemm && ins.size() == 2 && ins[0] != DType::F32 &&
      ins[0] == ins[1] && outs.size() == 1 && (outs[0] == DType::F32 || outs[0] == ins[0]))
    return &gemmMixedCall;
  if (id == catalogue::KernelId::FusedElementwise)
    return &fusedHalfCall;
  // AdamW writes its 16-bit working copies itself; its other operands are f32.
  if (id == catalogue::KernelId::AdamW && ins.size() > 2 && outs.size() == 4 * (ins.size() - 2))
    return &dispatch<catalogue::AdamW>;
  // The kernels whose handlers pass each float operand at its own type (typedIn, typedOut):
  // the maps, copies (bits between one 16-bit type, a conversion between two), reductions,
  // norms, softmax, cross entropy, embeddings and rotary embedding.
  switch (id) {
  case catalogue::KernelId::Fill:
  case catalogue::KernelId::Binary:
  case catalogue::KernelId::Unary:
  case catalogue::KernelId::UnaryGrad:
  case catalogue::KernelId::Where:
  case catalogue::KernelId::Copy:
  case catalogue::KernelId::Accumulate:
  case catalogue::KernelId::Reduce:
  case catalogue::KernelId::Softmax:
  case catalogue::KernelId::SoftmaxGrad:
  case catalogue::KernelId::LayerNorm:
  case catalogue::KernelId::LayerNormGrad:
  case catalogue::KernelId::RmsNorm:
  case catalogue::KernelId::RmsNormGrad:
  case catalogue::KernelId::CrossEntropy:
  case catalogue::KernelId::CrossEntropyGrad:
  case catalogue::KernelId::Embedding:
  case catalogue::KernelId::EmbeddingGrad:
  case catalogue::KernelId::Rope:
    return cudaKernel(id);
  default:
    return nullptr;
  }
}

KernelFn cudaKernel(catalogue::KernelId id) {
  switch (id) {
#define TESSEL_CUDA_KERNEL(Id)                                                                     \
  case catalogue::KernelId::Id:                                                                    \
    return &dispatch<catalogue::Id>;
    TESSEL_CUDA_KERNEL(Fill)
    TESSEL_CUDA_KERNEL(Positions)
    TESSEL_CUDA_KERNEL(Binary)
    TESSEL_CUDA_KERNEL(Unary)
    TESSEL_CUDA_KERNEL(UnaryGrad)
    TESSEL_CUDA_KERNEL(Where)
    TESSEL_CUDA_KERNEL(Copy)
    TESSEL_CUDA_KERNEL(Accumulate)
    TESSEL_CUDA_KERNEL(Softmax)
    TESSEL_CUDA_KERNEL(TopKMask)
    TESSEL_CUDA_KERNEL(SoftmaxGrad)
    TESSEL_CUDA_KERNEL(LayerNorm)
    TESSEL_CUDA_KERNEL(LayerNormGrad)
    TESSEL_CUDA_KERNEL(RmsNorm)
    TESSEL_CUDA_KERNEL(RmsNormGrad)
    TESSEL_CUDA_KERNEL(CrossEntropy)
    TESSEL_CUDA_KERNEL(CrossEntropyGrad)
    TESSEL_CUDA_KERNEL(AdamW)
    TESSEL_CUDA_KERNEL(Gemm)
    TESSEL_CUDA_KERNEL(Embedding)
    TESSEL_CUDA_KERNEL(EmbeddingGrad)
    TESSEL_CUDA_KERNEL(Rope)
    TESSEL_CUDA_KERNEL(Attention)
    TESSEL_CUDA_KERNEL(AttentionGrad)
    TESSEL_CUDA_KERNEL(AttentionBlock)
    TESSEL_CUDA_KERNEL(AttentionBlockGrad)
    TESSEL_CUDA_KERNEL(Reduce)
    TESSEL_CUDA_KERNEL(Pack)
    TESSEL_CUDA_KERNEL(Dropout)
    TESSEL_CUDA_KERNEL(FusedElementwise)
    TESSEL_CUDA_KERNEL(GlobalNorm)
    TESSEL_CUDA_KERNEL(SumSquares)
    TESSEL_CUDA_KERNEL(GuardFinite)
    TESSEL_CUDA_KERNEL(ClipCoefficient)
    TESSEL_CUDA_KERNEL(LearningRate)
    TESSEL_CUDA_KERNEL(ShardSlice)
    TESSEL_CUDA_KERNEL(Sgd)
    TESSEL_CUDA_KERNEL(CeMax)
    TESSEL_CUDA_KERNEL(CeSums)
    TESSEL_CUDA_KERNEL(CeLoss)
    TESSEL_CUDA_KERNEL(CeGrad)
#undef TESSEL_CUDA_KERNEL
#define TESSEL_CUDA_COLLECTIVE(Id)                                                                 \
  case catalogue::KernelId::Id:                                                                    \
    return &collective<catalogue::Id>;
    TESSEL_CUDA_COLLECTIVE(AllReduce)
    TESSEL_CUDA_COLLECTIVE(AllGather)
    TESSEL_CUDA_COLLECTIVE(ReduceScatter)
    TESSEL_CUDA_COLLECTIVE(AllToAll)
    TESSEL_CUDA_COLLECTIVE(Broadcast)
    TESSEL_CUDA_COLLECTIVE(Send)
    TESSEL_CUDA_COLLECTIVE(Recv)
#undef TESSEL_CUDA_COLLECTIVE
  case catalogue::KernelId::Wait:
    return &waitFor;
  default:
    return nullptr;
  }
}

} // namespace tessel::rt
