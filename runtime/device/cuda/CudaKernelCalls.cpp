//===- CudaKernelCalls.cpp - Plan kernels launched on a CUDA GPU ----------===//
//
// One launch per plan kernel: the call's arguments, checked when the plan was loaded
// (KernelArgs.h), handed to kernels/cuda on the stream of the launch in progress (CudaLaunch.h).
// Where a kernel's CUDA launcher takes each float operand at its own type (typedIn, typedOut),
// the same launch serves f32 calls and, through cudaSixteenBitKernel, calls with 16-bit
// operands. The collectives and `wait` are the launches every device shares
// (CollectiveCalls.h), ordered after the kernels that write their inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FusedSource.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::rt {

namespace {

/// The end of a launch: the CUDA error as the call's.
bool launched(KernelCall &c, cudaError_t e) {
  if (e == cudaSuccess)
    return true;
  return c.fail(std::string("CUDA launch failed: ") + cudaGetErrorString(e));
}

cudaStream_t stream(const KernelCall &c) { return cudaLaunchOf(c).stream(); }
cuda::IdError *idError(const KernelCall &c) { return cudaLaunchOf(c).idError(); }

/// Input k at the plan's element type (f32 for a call made without a plan instruction).
cuda::ConstFloats typedIn(KernelCall &c, size_t k) {
  return {c.in[k], c.instr ? elementTypeOf(c.instr->inputs[k].dtype) : cuda::ElementType::F32};
}
/// Output k at the plan's element type.
cuda::Floats typedOut(KernelCall &c, size_t k) {
  return {c.out[k], c.instr ? elementTypeOf(c.instr->outputs[k].dtype) : cuda::ElementType::F32};
}

/// `bytes` of the launch's scratch memory; null with the call's error.
void *scratchBytes(KernelCall &c, uint64_t bytes) {
  std::string why;
  void *p = cudaLaunchOf(c).scratch(bytes, why);
  if (!p)
    c.fail("scratch memory: " + why);
  return p;
}
/// `floats` f32 elements of the launch's scratch memory; null with the call's error.
float *scratchFloats(KernelCall &c, int64_t floats) {
  return static_cast<float *>(scratchBytes(c, static_cast<uint64_t>(floats) * sizeof(float)));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

bool launch(KernelCall &c, const args::Fill &a) {
  return launched(c, cuda::fill(a.n, a.value, typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::Positions &a) {
  return launched(c, cuda::positions(a.n, c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::Binary &a) {
  return launched(c, cuda::binary(a.op, a.shape, typedIn(c, 0), a.a, typedIn(c, 1), a.b,
                                  typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::Unary &a) {
  return launched(c,
                  cuda::unary(a.op, a.n, typedIn(c, 0), typedOut(c, 0), a.exponent, stream(c)));
}

bool launch(KernelCall &c, const args::UnaryGrad &a) {
  return launched(c, cuda::unaryGrad(a.op, a.n, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                     typedOut(c, 0), a.exponent, stream(c)));
}

bool launch(KernelCall &c, const args::Where &a) {
  return launched(c, cuda::select(a.shape, typedIn(c, 0), a.cond, typedIn(c, 1), a.a,
                                  typedIn(c, 2), a.b, typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::Copy &a) {
  // Between buffers of one 16-bit type the copy moves bits; between types it converts.
  cuda::ConstFloats x = typedIn(c, 0);
  x.data = static_cast<const char *>(x.data) + a.xOffset * cuda::elementBytes(x.type);
  return launched(c, cuda::stridedCopy(a.shape, x, a.x, typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::ShardSlice &a) {
  return launched(c, cuda::stridedCopy(a.shape, c.fin(0) + a.offset, a.x, c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::Accumulate &a) {
  if (a.n == 0)
    return true;
  cuda::Shape shape;
  shape.rank = 1;
  shape.size[0] = a.n;
  const cuda::Strides dense = cuda::denseStrides(shape);
  return launched(c, cuda::binary(cuda::BinaryKind::Add, shape, typedOut(c, 0), dense,
                                  typedIn(c, 0), dense, typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::Dropout &a) {
  std::vector<int64_t> offset, whole;
  dropoutPlacement(c, a, offset, whole);
  return launched(c, cuda::dropoutBlock(a.shape, offset, a.tail, whole, a.rate,
                                        dropoutSeed(c, a.mask), c.fin(0), c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::Pack &a) {
  std::vector<const float *> inputs(c.in.size());
  for (size_t k = 0; k < inputs.size(); ++k)
    inputs[k] = c.fin(k);
  return launched(c, cuda::pack(static_cast<int64_t>(inputs.size()), inputs.data(),
                                a.outers.data(), a.chunks.data(), a.ways, c.fout(0), stream(c)));
}

/// The operands' addresses of a fused call, as the kernels take them (a 16-bit operand's
/// address is not an f32 array: only a kernel generated for its type reads it).
void fusedOperands(KernelCall &c, std::vector<const float *> &ins, std::vector<float *> &outs) {
  for (size_t k = 0; k < c.in.size(); ++k)
    ins.push_back(c.fin(k));
  for (size_t o = 0; o < c.out.size(); ++o)
    outs.push_back(c.fout(o));
}

/// Runs a fused call on the kernel generated for it at plan load.
bool launchGenerated(KernelCall &c, const args::FusedElementwise &a, cudaKernel_t generated) {
  std::vector<const float *> ins;
  std::vector<float *> outs;
  fusedOperands(c, ins, outs);
  cuda::FusedKernelArgs kernelArgs;
  if (!cuda::fusedKernelArgs(a.shape, a.strides, ins, outs, kernelArgs))
    return c.fail("has more inputs or outputs than a generated kernel takes");
  return launched(c, cuda::launchFusedKernel(generated, a.shape, kernelArgs, stream(c)));
}

/// A fused elementwise body: the kernel generated for this call at plan load
/// (CudaDevice::prepare), else the interpreter (FusedElementwise.cu). A call with 16-bit
/// operands comes here only between widening copies (its generated kernel, made for its types,
/// runs from fusedHalfCall), so it takes the interpreter.
bool launch(KernelCall &c, const args::FusedElementwise &a) {
  bool widened = false;
  if (c.instr)
    for (const auto *operands : {&c.instr->inputs, &c.instr->outputs})
      for (const planfile::BufferRef &b : *operands)
        widened = widened || isHalf(b.dtype);
  if (cudaKernel_t generated = widened ? nullptr : cudaLaunchOf(c).fusedKernel(c.instr))
    return launchGenerated(c, a, generated);
  std::vector<const float *> ins;
  std::vector<float *> outs;
  fusedOperands(c, ins, outs);
  return launched(c, cuda::fusedElementwise(a.shape, a.steps, ins, a.strides, outs, a.outSteps,
                                            stream(c)));
}

//===----------------------------------------------------------------------===//
// Reductions, rows, losses
//===----------------------------------------------------------------------===//

bool launch(KernelCall &c, const args::Reduce &a) {
  // The runs of long sums (a bias gradient's rows) in parallel, in scratch memory.
  const int64_t workspaceBytes = cuda::reduceSumWorkspaceBytes(a.shape, a.y);
  float *workspace = nullptr;
  if (workspaceBytes > 0 && !(workspace = scratchFloats(c, (workspaceBytes + 3) / 4)))
    return false;
  return launched(c, cuda::reduceSum(a.shape, typedIn(c, 0), a.y, a.scale, typedOut(c, 0),
                                     stream(c), a.accumulate, workspace));
}

bool launch(KernelCall &c, const args::Softmax &a) {
  return launched(c, cuda::softmax(a.rows, a.cols, typedIn(c, 0), typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::SoftmaxGrad &a) {
  return launched(c, cuda::softmaxGrad(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1),
                                       typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::TopKMask &a) {
  return launched(c, cuda::topKMask(a.rows, a.cols, a.k, c.fin(0), c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::LayerNorm &a) {
  return launched(c, cuda::layerNorm(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                     a.eps, typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::LayerNormGrad &a) {
  float *workspace = scratchFloats(c, cuda::normGradWorkspace(a.rows, a.cols));
  return workspace &&
         launched(c, cuda::layerNormGrad(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1),
                                         typedIn(c, 2), a.eps, typedOut(c, 0), typedOut(c, 1),
                                         typedOut(c, 2), workspace, stream(c)));
}

bool launch(KernelCall &c, const args::RmsNorm &a) {
  return launched(c, cuda::rmsNorm(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1), a.eps,
                                   typedOut(c, 0), stream(c)));
}

bool launch(KernelCall &c, const args::RmsNormGrad &a) {
  float *workspace = scratchFloats(c, cuda::normGradWorkspace(a.rows, a.cols));
  return workspace &&
         launched(c, cuda::rmsNormGrad(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1),
                                       typedIn(c, 2), a.eps, typedOut(c, 0), typedOut(c, 1),
                                       workspace, stream(c)));
}

bool launch(KernelCall &c, const args::CrossEntropy &plan) {
  const args::CrossEntropy a = stepLossScale(c, plan);
  float *workspace = scratchFloats(c, cuda::crossEntropyWorkspace(a.rows));
  return workspace && launched(c, cuda::crossEntropy(a.rows, a.cols, typedIn(c, 0), c.ids(1),
                                                     a.scaled, a.scale, c.fout(0), workspace,
                                                     idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::CrossEntropyGrad &plan) {
  const args::CrossEntropy a = stepLossScale(c, plan);
  return launched(c, cuda::crossEntropyGrad(a.rows, a.cols, typedIn(c, 0), c.ids(1), c.fin(2),
                                            a.scaled, a.scale, typedOut(c, 0), idError(c),
                                            stream(c)));
}

bool launch(KernelCall &c, const args::CeMax &a) {
  return launched(c, cuda::ceMax(a.rows, a.cols, c.fin(0), c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::CeSums &a) {
  return launched(c, cuda::ceSums(a.rows, a.cols, a.first, a.classes, c.fin(0), c.ids(1),
                                  c.fin(2), c.fout(0), c.fout(1), idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::CeLoss &a) {
  return launched(c, cuda::ceLoss(a.rows, c.fin(0), c.fin(1), c.fin(2),
                                  stepLossScale(c, a.scale), c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::CeGrad &a) {
  return launched(c, cuda::ceGrad(a.rows, a.cols, a.first, a.classes, c.fin(0), c.ids(1),
                                  c.fin(2), c.fin(3), c.fin(4), stepLossScale(c, a.scale),
                                  c.fout(0), idError(c), stream(c)));
}

//===----------------------------------------------------------------------===//
// Products, attention, positions, embeddings
//===----------------------------------------------------------------------===//

/// The end of a product: cuBLASLt's status as the call's error.
bool multiplied(KernelCall &c, cublasStatus_t s) {
  if (s == CUBLAS_STATUS_SUCCESS)
    return true;
  return c.fail(std::string("cuBLASLt product failed: ") +
                cudaLaunchOf(c).blas().lt->cublasLtGetStatusString(s));
}

bool launch(KernelCall &c, const args::Gemm &a) {
  const cuda::BlasContext &blas = cudaLaunchOf(c).blas();
  for (const auto &[ao, bo, co] : a.offsets)
    if (!multiplied(c, cuda::gemm(blas, a.args, c.fin(0) + ao, c.fin(1) + bo, c.fout(0) + co,
                                  stream(c))))
      return false;
  return true;
}

/// gemm with 16-bit a and b, into an f32 c (a weight's gradient under mixed precision) or a c
/// of their type (an activation): cuBLASLt's 16-bit product with f32 accumulation, no widening
/// copies. The checked offsets count elements; each operand's apply at its own width.
bool launchMixedGemm(KernelCall &c, const KernelArgs &args) {
  const args::Gemm &g = args.as<args::Gemm>();
  const cuda::BlasContext &blas = cudaLaunchOf(c).blas();
  const planfile::DType abType = c.instr->inputs[0].dtype, outType = c.instr->outputs[0].dtype;
  const size_t abBytes = planfile::dtypeBytes(abType), outBytes = planfile::dtypeBytes(outType);
  const auto *a = static_cast<const char *>(c.in[0]);
  const auto *b = static_cast<const char *>(c.in[1]);
  auto *out = static_cast<char *>(c.out[0]);
  for (const auto &[ao, bo, co] : g.offsets)
    if (!multiplied(c, cuda::gemmMixed(blas, g.args, elementTypeOf(abType),
                                       a + static_cast<size_t>(ao) * abBytes,
                                       b + static_cast<size_t>(bo) * abBytes,
                                       elementTypeOf(outType),
                                       out + static_cast<size_t>(co) * outBytes, stream(c))))
      return false;
  return true;
}

bool launch(KernelCall &c, const args::Attention &a) {
  return launched(c, cuda::attention(a.a, c.fin(0), c.fin(1), c.fin(2), c.fout(0),
                                     a.lse ? c.fout(1) : nullptr, stream(c)));
}

bool launch(KernelCall &c, const args::AttentionGrad &a) {
  float *workspace = scratchFloats(c, cuda::attentionGradWorkspace(a.a, a.lse));
  return workspace &&
         launched(c, cuda::attentionGrad(a.a, c.fin(0), c.fin(1), c.fin(2), c.fin(3),
                                         a.lse ? c.fin(4) : nullptr, a.lse ? c.fin(5) : nullptr,
                                         c.fout(0), c.fout(1), c.fout(2), workspace, stream(c)));
}

/// A ring step's query and key blocks placed in the whole sequence, as the CUDA kernels take
/// them.
cuda::AttentionArgs placedRing(const args::AttentionBlock &a) {
  kernels::RingBlockArgs r = a.r;
  placeRingBlocks(r);
  return r.attention;
}

bool launch(KernelCall &c, const args::AttentionBlock &a) {
  const cuda::AttentionArgs at = placedRing(a);
  float *workspace = scratchFloats(c, cuda::attentionBlockWorkspace(at));
  return workspace && launched(c, cuda::attentionBlock(at, c.fin(0), c.fin(1), c.fin(2), a.first,
                                                       c.fout(0), c.fout(1), workspace, stream(c)));
}

bool launch(KernelCall &c, const args::AttentionBlockGrad &a) {
  const cuda::AttentionArgs at = placedRing(a);
  float *workspace = scratchFloats(c, cuda::attentionBlockGradWorkspace(at));
  return workspace &&
         launched(c, cuda::attentionBlockGrad(at, c.fin(0), c.fin(1), c.fin(2), c.fin(3),
                                              c.fin(4), c.fin(5), a.first, c.fout(0), c.fout(1),
                                              c.fout(2), workspace, stream(c)));
}

/// The caches are outputs read and written in place, each at its own type (a 16-bit cache is
/// never widened whole).
bool launch(KernelCall &c, const args::PagedAttention &a) {
  const int64_t floats = cuda::pagedAttentionWorkspace(a.a);
  float *workspace = nullptr;
  if (floats > 0 && !(workspace = scratchFloats(c, floats)))
    return false;
  return launched(c, cuda::pagedAttention(a.a, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                          c.ids(3), c.ids(4), typedOut(c, 0), typedOut(c, 1),
                                          typedOut(c, 2), workspace, stream(c)));
}

bool launch(KernelCall &c, const args::RunningSum &a) {
  return launched(c, cuda::runningSum(a.a, c.fin(0), c.ids(1), c.ids(2), c.fout(0), c.fout(1),
                                      stream(c)));
}

bool launch(KernelCall &c, const args::Rope &a) {
  return launched(c, cuda::rope(a.batch, a.seq, a.heads, a.head, a.theta, a.inverse, typedIn(c, 0),
                                typedOut(c, 0), stream(c), a.headStart, a.tailStart, a.scaling,
                                a.positions ? c.ids(1) : nullptr));
}

bool launch(KernelCall &c, const args::Embedding &a) {
  return launched(c, cuda::embedding(a.n, a.rows, a.cols, a.first, a.vocab, typedIn(c, 0),
                                     c.ids(1), typedOut(c, 0), idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::EmbeddingGrad &a) {
  const size_t bytes = cuda::embeddingGradWorkspace(a.n, a.rows);
  void *workspace = scratchBytes(c, bytes);
  return workspace && launched(c, cuda::embeddingGrad(a.n, a.rows, a.cols, a.first, a.vocab,
                                                      typedIn(c, 0), c.ids(1), typedOut(c, 0),
                                                      workspace, bytes, idError(c), stream(c)));
}

//===----------------------------------------------------------------------===//
// Optimizer and control
//===----------------------------------------------------------------------===//

/// global_norm and sum_squares: the sum of squares of every input, in input order.
bool sumOfSquares(KernelCall &c, bool root) {
  std::vector<const float *> inputs;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < c.in.size(); ++k) {
    inputs.push_back(c.fin(k));
    sizes.push_back(static_cast<int64_t>(c.inElements[k]));
  }
  const int64_t count = static_cast<int64_t>(inputs.size());
  auto *workspace = static_cast<double *>(
      scratchBytes(c, static_cast<uint64_t>(cuda::sumOfSquaresWorkspace(count, sizes.data())) * sizeof(double)));
  return workspace && launched(c, cuda::sumOfSquares(count, inputs.data(), sizes.data(), root,
                                                     c.fout(0), workspace, stream(c)));
}

bool launch(KernelCall &c, const args::GlobalNorm &) { return sumOfSquares(c, true); }
bool launch(KernelCall &c, const args::SumSquares &) { return sumOfSquares(c, false); }

/// Ends the program when an input holds a value that is not finite. The executor decides
/// before it launches the next kernel, so this waits for the stream: one synchronisation per
/// step, where the plan checks the reduced gradient norm.
bool launch(KernelCall &c, const args::GuardFinite &) {
  auto *flag = static_cast<int *>(scratchBytes(c, sizeof(int)));
  if (!flag || !launched(c, cudaMemsetAsync(flag, 0, sizeof(int), stream(c))))
    return false;
  for (size_t k = 0; k < c.in.size(); ++k)
    if (!launched(c, cuda::findNonFinite(static_cast<int64_t>(c.inElements[k]), c.fin(k), flag,
                                         stream(c))))
      return false;
  int found = 0;
  if (!launched(c,
                cudaMemcpyAsync(&found, flag, sizeof found, cudaMemcpyDeviceToHost, stream(c))) ||
      !launched(c, cudaStreamSynchronize(stream(c))))
    return false;
  c.stop = found != 0;
  return true;
}

bool launch(KernelCall &c, const args::ClipCoefficient &a) {
  return launched(c, cuda::clipCoefficient(c.fin(0), a.max, c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::LearningRate &a) {
  // A function of the step alone: computed here, as on the CPU, and written by a fill.
  return launched(c, cuda::fill(1, static_cast<float>(scheduledLearningRate(a.schedule, c.ctx->step)),
                                c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::AdamW &a) {
  const size_t k = a.n.size();
  cuda::AdamWArgs h;
  static_cast<kernels::AdamWHyper &>(h) = a.hyper;
  h.step = c.ctx->step;
  h.lr = c.fin(k);
  h.gradScale = c.fin(k + 1);
  // The working copies, written by the same pass in their own type (the 16-bit table below
  // sends 16-bit ones here, not through the widening wrapper); the catalogue gives every
  // working copy of a call one type.
  if (a.working)
    h.workingType = elementTypeOf(c.instr->outputs[3 * k].dtype);
  std::vector<cuda::AdamWTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {a.n[t],        c.fout(t),         c.fin(t),
                  c.fout(k + t), c.fout(2 * k + t), a.working ? c.out[3 * k + t] : nullptr};
  return launched(c, cuda::adamw(h, tensors.data(), k, stream(c)));
}

bool launch(KernelCall &c, const args::Sgd &a) {
  const size_t k = a.n.size();
  cuda::SgdArgs h;
  h.momentum = a.momentum;
  h.weightDecay = a.weightDecay;
  h.lr = c.fin(k);
  h.gradScale = c.fin(k + 1);
  std::vector<cuda::SgdTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {a.n[t], c.fout(t), c.fin(t), c.fout(k + t)};
  return launched(c, cuda::sgd(h, tensors.data(), k, stream(c)));
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Orders a collective's work after the kernels launched before it on this launch's stream,
/// which write its input. A communicator that enqueues on a GPU stream (NCCL) waits for them
/// there, and so does this thread's stream, on which the kernel's own copies go (a group of
/// one, a head-tail reordering; CudaCommMemory). Otherwise, ranks as threads, the host waits
/// for them: the communicator's copies are issued by another thread.
bool orderCollective(KernelCall &c) {
  cudaStream_t s = stream(c);
  cudaError_t e;
  if (c.comm && c.comm->orderAfter(s)) {
    cudaEvent_t ready = cudaLaunchOf(c).collectiveEvent();
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

bool launch(KernelCall &c, const args::Collective &a) {
  return orderCollective(c) && launchCollective(c, a);
}

/// `wait`: the shared launch. The operation it ends wrote its output before the host learns it
/// is done, so the kernels after it, launched later, see it.
bool launch(KernelCall &c, const args::Wait &a) { return launchWait(c, a); }

//===----------------------------------------------------------------------===//
// Tables
//===----------------------------------------------------------------------===//

/// Launches the kernel whose arguments are A.
template <class A> bool launchAs(KernelCall &c, const KernelArgs &args) {
  return launch(c, args.as<A>());
}

/// fused_elementwise with 16-bit operands: the kernel generated for the call's types loads and
/// stores them itself; where none was loaded (no NVRTC), the interpreter between widening
/// copies.
bool launchFusedHalf(KernelCall &c, const KernelArgs &args) {
  if (cudaKernel_t generated = cudaLaunchOf(c).fusedKernel(c.instr))
    return launchGenerated(c, args.as<args::FusedElementwise>(), generated);
  return cudaWidenedCall(c, args);
}

/// The one 16-bit type of a call's first `ins` inputs and `outs` outputs (its operands of the
/// data's type: the rest are f32 statistics), if there is one.
std::optional<cuda::Half16> oneHalfType(const KernelCall &c, size_t ins, size_t outs) {
  const planfile::DType t = c.instr->inputs[0].dtype;
  if (!isHalf(t))
    return std::nullopt;
  for (size_t k = 0; k < ins; ++k)
    if (c.instr->inputs[k].dtype != t)
      return std::nullopt;
  for (size_t k = 0; k < outs; ++k)
    if (c.instr->outputs[k].dtype != t)
      return std::nullopt;
  return halfKind(t);
}

const uint16_t *halfIn(const KernelCall &c, size_t k) {
  return static_cast<const uint16_t *>(c.in[k]);
}
uint16_t *halfOut(const KernelCall &c, size_t k) { return static_cast<uint16_t *>(c.out[k]); }

/// Whether every operand of a call starts on 16 bytes (the tensor-core kernels' loads).
bool operandsAligned(const KernelCall &c) {
  for (const auto *operands : {&c.in, &c.out})
    for (const void *p : *operands)
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
        return false;
  return true;
}

/// The type the tensor-core attention kernels run a call on: its first `ins` inputs and `outs`
/// outputs (all but the f32 lse) of one 16-bit type, at sizes they take, on 16 bytes. None for
/// any other call, which runs widened.
std::optional<cuda::Half16> tensorCoreType(const KernelCall &c, const cuda::AttentionArgs &a,
                                           size_t ins, size_t outs) {
  const std::optional<cuda::Half16> type = oneHalfType(c, ins, outs);
  if (!type || !cuda::flashAttentionTakes(a) || !operandsAligned(c))
    return std::nullopt;
  return type;
}

/// attention on 16-bit operands: the tensor-core kernels on the operands as they are where
/// they take the call, else the f32 kernel between widening copies.
bool launchAttentionHalf(KernelCall &c, const KernelArgs &args) {
  const args::Attention &call = args.as<args::Attention>();
  const std::optional<cuda::Half16> type = tensorCoreType(c, call.a, 3, 1);
  if (!type)
    return cudaWidenedCall(c, args);
  return launched(c, cuda::flashAttention(*type, call.a, halfIn(c, 0), halfIn(c, 1), halfIn(c, 2),
                                          halfOut(c, 0), call.lse ? c.fout(1) : nullptr,
                                          stream(c)));
}

bool launchAttentionGradHalf(KernelCall &c, const KernelArgs &args) {
  const args::AttentionGrad &call = args.as<args::AttentionGrad>();
  const std::optional<cuda::Half16> type = tensorCoreType(c, call.a, call.lse ? 5 : 4, 3);
  if (!type)
    return cudaWidenedCall(c, args);
  void *workspace = scratchBytes(c, cuda::flashAttentionGradWorkspaceBytes(call.a, call.lse));
  return workspace &&
         launched(c, cuda::flashAttentionGrad(
                         *type, call.a, halfIn(c, 0), halfIn(c, 1), halfIn(c, 2), halfIn(c, 3),
                         call.lse ? halfIn(c, 4) : nullptr, call.lse ? c.fin(5) : nullptr,
                         halfOut(c, 0), halfOut(c, 1), halfOut(c, 2), workspace, stream(c)));
}

/// The largest head the attention kernels take.
bool headFits(KernelCall &c, int64_t head) {
  if (head <= cuda::kMaxAttentionHead)
    return true;
  return c.fail("has head size " + std::to_string(head) +
                "; the cuda attention kernels take at most " +
                std::to_string(cuda::kMaxAttentionHead));
}

} // namespace

KernelFn cudaKernel(catalogue::KernelId id) {
  // Every kernel of the catalogue has a launch here: one missing fails to compile.
  static const KernelFn table[] = {
#define TESSEL_KERNEL(Id, Name, Family, Doc) &launchAs<args::Id>,
#include "common/catalogue/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  return table[static_cast<size_t>(id)];
}

KernelFn cudaSixteenBitKernel(catalogue::KernelId id, const std::vector<planfile::DType> &ins,
                              const std::vector<planfile::DType> &outs) {
  using planfile::DType;
  if (sixteenBitOf(id) != SixteenBit::CudaNative)
    return nullptr;
  switch (id) {
  case catalogue::KernelId::Gemm:
    // A product of two 16-bit operands of one type, into f32 or that type: the tensor cores.
    if (ins.size() == 2 && ins[0] != DType::F32 && ins[0] == ins[1] && outs.size() == 1 &&
        (outs[0] == DType::F32 || outs[0] == ins[0]))
      return &launchMixedGemm;
    return nullptr;
  case catalogue::KernelId::FusedElementwise:
    return &launchFusedHalf;
  case catalogue::KernelId::Attention:
    return &launchAttentionHalf;
  case catalogue::KernelId::AttentionGrad:
    return &launchAttentionGradHalf;
  default:
    // AdamW writes its 16-bit working copies itself; the others pass each float operand at
    // its own type (typedIn, typedOut).
    return cudaKernel(id);
  }
}

bool cudaAccepts(KernelCall &c, const KernelArgs &args) {
  switch (args.id()) {
  case catalogue::KernelId::Attention:
    return headFits(c, args.as<args::Attention>().a.head);
  case catalogue::KernelId::AttentionGrad:
    return headFits(c, args.as<args::AttentionGrad>().a.head);
  case catalogue::KernelId::AttentionBlock:
    return headFits(c, args.as<args::AttentionBlock>().r.attention.head);
  case catalogue::KernelId::AttentionBlockGrad:
    return headFits(c, args.as<args::AttentionBlockGrad>().r.attention.head);
  case catalogue::KernelId::PagedAttention:
    return headFits(c, args.as<args::PagedAttention>().a.head);
  case catalogue::KernelId::FusedElementwise: {
    const size_t steps = args.as<args::FusedElementwise>().steps.size();
    if (steps > static_cast<size_t>(cuda::kMaxFusedSteps) ||
        c.in.size() > static_cast<size_t>(cuda::kMaxFusedInputs) ||
        c.out.size() > static_cast<size_t>(cuda::kMaxFusedOutputs))
      return c.fail("has " + std::to_string(steps) + " steps, " + std::to_string(c.in.size()) +
                    " inputs and " + std::to_string(c.out.size()) +
                    " outputs; the cuda device runs at most " +
                    std::to_string(cuda::kMaxFusedSteps) + ", " +
                    std::to_string(cuda::kMaxFusedInputs) + " and " +
                    std::to_string(cuda::kMaxFusedOutputs) + " (compile with --fuse=off)");
    return true;
  }
  default:
    return true;
  }
}

} // namespace tessel::rt
