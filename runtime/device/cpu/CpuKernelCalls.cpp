//===- CpuKernelCalls.cpp - Plan kernels launched on the CPU --------------===//
//
// One launch per plan kernel: the call's arguments, checked when the plan was loaded
// (KernelArgs.h), handed to kernels/cpu with the operands' addresses. The collectives and
// `wait` are the launches every device shares (CollectiveCalls.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cpu/CpuKernelCalls.h"
#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/KernelArgs.h"

#include "kernels/cpu/CpuKernels.h"

#include <cmath>
#include <cstring>

namespace tessel::rt {

namespace {

bool launch(KernelCall &c, const args::Fill &a) {
  std::fill(c.fout(0), c.fout(0) + a.n, a.value);
  return true;
}

bool launch(KernelCall &c, const args::Positions &a) {
  cpu::positions(a.n, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::Binary &a) {
  cpu::binary(a.op, a.shape, c.fin(0), a.a, c.fin(1), a.b, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::Unary &a) {
  cpu::unary(a.op, a.n, c.fin(0), c.fout(0), a.exponent);
  return true;
}

bool launch(KernelCall &c, const args::UnaryGrad &a) {
  cpu::unaryGrad(a.op, a.n, c.fin(0), c.fin(1), c.fin(2), c.fout(0), a.exponent);
  return true;
}

bool launch(KernelCall &c, const args::Where &a) {
  cpu::select(a.shape, c.fin(0), a.cond, c.fin(1), a.a, c.fin(2), a.b, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::FusedElementwise &a) {
  std::vector<const float *> ins(c.in.size());
  std::vector<float *> outs(c.out.size());
  for (size_t k = 0; k < ins.size(); ++k)
    ins[k] = c.fin(k);
  for (size_t o = 0; o < outs.size(); ++o)
    outs[o] = c.fout(o);
  cpu::fusedElementwise(a.shape, a.steps, ins, a.strides, outs, a.outSteps);
  return true;
}

bool launch(KernelCall &c, const args::Dropout &a) {
  std::vector<int64_t> offset, whole;
  dropoutPlacement(c, a, offset, whole);
  cpu::dropoutBlock(a.shape, offset, a.tail, whole, a.rate, dropoutSeed(c, a.mask), c.fin(0),
                    c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::Copy &a) {
  cpu::stridedCopy(a.shape, c.fin(0) + a.xOffset, a.x, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::Reduce &a) {
  cpu::reduceSum(a.shape, c.fin(0), a.y, a.yElements, a.scale, c.fout(0), a.accumulate);
  return true;
}

bool launch(KernelCall &c, const args::Accumulate &a) {
  kernels::Shape shape;
  shape.rank = 1;
  shape.size[0] = a.n;
  const kernels::Strides dense = kernels::denseStrides(shape);
  cpu::binary(cpu::BinaryKind::Add, shape, c.fout(0), dense, c.fin(0), dense, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::Pack &a) {
  std::vector<const float *> inputs(c.in.size());
  for (size_t k = 0; k < inputs.size(); ++k)
    inputs[k] = c.fin(k);
  cpu::pack(static_cast<int64_t>(inputs.size()), inputs.data(), a.outers.data(), a.chunks.data(),
            a.ways, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::ShardSlice &a) {
  cpu::stridedCopy(a.shape, c.fin(0) + a.offset, a.x, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::Gemm &a) {
  for (const auto &[ao, bo, co] : a.offsets)
    cpu::gemm(a.args, c.fin(0) + ao, c.fin(1) + bo, c.fout(0) + co);
  return true;
}

bool launch(KernelCall &c, const args::Softmax &a) {
  cpu::softmax(a.rows, a.cols, c.fin(0), c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::SoftmaxGrad &a) {
  cpu::softmaxGrad(a.rows, a.cols, c.fin(0), c.fin(1), c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::TopKMask &a) {
  cpu::topKMask(a.rows, a.cols, a.k, c.fin(0), c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::LayerNorm &a) {
  cpu::layerNorm(a.rows, a.cols, c.fin(0), c.fin(1), c.fin(2), a.eps, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::LayerNormGrad &a) {
  cpu::layerNormGrad(a.rows, a.cols, c.fin(0), c.fin(1), c.fin(2), a.eps, c.fout(0), c.fout(1),
                     c.fout(2));
  return true;
}

bool launch(KernelCall &c, const args::RmsNorm &a) {
  cpu::rmsNorm(a.rows, a.cols, c.fin(0), c.fin(1), a.eps, c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::RmsNormGrad &a) {
  cpu::rmsNormGrad(a.rows, a.cols, c.fin(0), c.fin(1), c.fin(2), a.eps, c.fout(0), c.fout(1));
  return true;
}

bool launch(KernelCall &c, const args::Embedding &a) {
  return cpu::embeddingRows(a.n, a.rows, a.cols, a.first, a.vocab, c.fin(0), c.ids(1), c.fout(0),
                            c.error);
}

bool launch(KernelCall &c, const args::EmbeddingGrad &a) {
  return cpu::embeddingGradRows(a.n, a.rows, a.cols, a.first, a.vocab, c.fin(0), c.ids(1),
                                c.fout(0), c.error);
}

bool launch(KernelCall &c, const args::CrossEntropy &plan) {
  const args::CrossEntropy a = stepLossScale(c, plan);
  if (a.scaled)
    return cpu::crossEntropy(a.rows, a.cols, c.fin(0), c.ids(1), a.scale, c.fout(0), c.error);
  return cpu::crossEntropy(a.rows, a.cols, c.fin(0), c.ids(1), c.fout(0), c.error);
}

bool launch(KernelCall &c, const args::CrossEntropyGrad &plan) {
  const args::CrossEntropy a = stepLossScale(c, plan);
  if (a.scaled)
    return cpu::crossEntropyGrad(a.rows, a.cols, c.fin(0), c.ids(1), c.fin(2), a.scale, c.fout(0),
                                 c.error);
  return cpu::crossEntropyGrad(a.rows, a.cols, c.fin(0), c.ids(1), c.fin(2), c.fout(0), c.error);
}

bool launch(KernelCall &c, const args::CeMax &a) {
  cpu::ceMax(a.rows, a.cols, c.fin(0), c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::CeSums &a) {
  return cpu::ceSums(a.rows, a.cols, a.first, a.classes, c.fin(0), c.ids(1), c.fin(2), c.fout(0),
                     c.fout(1), c.error);
}

bool launch(KernelCall &c, const args::CeLoss &a) {
  cpu::ceLoss(a.rows, c.fin(0), c.fin(1), c.fin(2), stepLossScale(c, a.scale), c.fout(0));
  return true;
}

bool launch(KernelCall &c, const args::CeGrad &a) {
  return cpu::ceGrad(a.rows, a.cols, a.first, a.classes, c.fin(0), c.ids(1), c.fin(2), c.fin(3),
                     c.fin(4), stepLossScale(c, a.scale), c.fout(0), c.error);
}

bool launch(KernelCall &c, const args::Attention &a) {
  cpu::attention(a.a, c.fin(0), c.fin(1), c.fin(2), c.fout(0), a.lse ? c.fout(1) : nullptr);
  return true;
}

bool launch(KernelCall &c, const args::AttentionGrad &a) {
  cpu::attentionGrad(a.a, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fout(0), c.fout(1), c.fout(2),
                     a.lse ? c.fin(4) : nullptr, a.lse ? c.fin(5) : nullptr);
  return true;
}

bool launch(KernelCall &c, const args::AttentionBlock &a) {
  cpu::attentionBlock(a.r, c.fin(0), c.fin(1), c.fin(2), a.first, c.fout(0), c.fout(1));
  return true;
}

bool launch(KernelCall &c, const args::AttentionBlockGrad &a) {
  cpu::attentionBlockGrad(a.r, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fin(4), c.fin(5), a.first,
                          c.fout(0), c.fout(1), c.fout(2));
  return true;
}

bool launch(KernelCall &c, const args::PagedAttention &a) {
  cpu::pagedAttention(a.a, c.fin(0), c.fin(1), c.fin(2), c.ids(3), c.ids(4), c.fout(0), c.fout(1),
                      c.fout(2));
  return true;
}

bool launch(KernelCall &c, const args::RunningSum &a) {
  cpu::runningSum(a.a, c.fin(0), c.ids(1), c.ids(2), c.fout(0), c.fout(1));
  return true;
}

bool launch(KernelCall &c, const args::Rope &a) {
  cpu::rope(a.batch, a.seq, a.heads, a.head, a.theta, a.inverse, c.fin(0), c.fout(0), a.headStart,
            a.tailStart, a.scaling, a.positions ? c.ids(1) : nullptr);
  return true;
}

/// The sum of squares of every input, in input order, each input's sum in double: the same
/// bits however the plan is run.
double sumOfSquares(KernelCall &c) {
  double sum = 0;
  for (size_t k = 0; k < c.in.size(); ++k)
    sum += cpu::sumOfSquares(static_cast<int64_t>(c.inElements[k]), c.fin(k));
  return sum;
}

bool launch(KernelCall &c, const args::GlobalNorm &) {
  c.fout(0)[0] = static_cast<float>(std::sqrt(sumOfSquares(c)));
  return true;
}

bool launch(KernelCall &c, const args::SumSquares &) {
  c.fout(0)[0] = static_cast<float>(sumOfSquares(c));
  return true;
}

bool launch(KernelCall &c, const args::GuardFinite &) {
  for (size_t k = 0; k < c.in.size() && !c.stop; ++k) {
    const float *x = c.fin(k);
    for (uint64_t e = 0; e < c.inElements[k]; ++e)
      if (!std::isfinite(x[e])) {
        c.stop = true;
        break;
      }
  }
  return true;
}

bool launch(KernelCall &c, const args::ClipCoefficient &a) {
  // As torch.nn.utils.clip_grad_norm_: max / (norm + 1e-6), clamped at 1, in f32.
  const float coefficient = a.max / (c.fin(0)[0] + 1e-6f);
  c.fout(0)[0] = std::min(coefficient, 1.0f);
  return true;
}

bool launch(KernelCall &c, const args::LearningRate &a) {
  c.fout(0)[0] = static_cast<float>(scheduledLearningRate(a.schedule, c.ctx->step));
  return true;
}

bool launch(KernelCall &c, const args::AdamW &a) {
  const size_t k = a.n.size();
  cpu::AdamWArgs h;
  static_cast<kernels::AdamWHyper &>(h) = a.hyper;
  h.lr = c.fin(k)[0];
  h.gradScale = c.fin(k + 1)[0];
  h.step = c.ctx->step;
  std::vector<cpu::AdamWTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {a.n[t], c.fout(t), c.fin(t), c.fout(k + t), c.fout(2 * k + t)};
  cpu::adamw(h, tensors.data(), k);
  // A 16-bit working copy is f32 scratch here, which the widening wrapper rounds.
  if (a.working)
    for (size_t t = 0; t < k; ++t)
      std::memcpy(c.fout(3 * k + t), c.fout(t), static_cast<size_t>(a.n[t]) * sizeof(float));
  return true;
}

bool launch(KernelCall &c, const args::Sgd &a) {
  const size_t k = a.n.size();
  cpu::SgdArgs h;
  h.lr = c.fin(k)[0];
  h.gradScale = c.fin(k + 1)[0];
  h.momentum = a.momentum;
  h.weightDecay = a.weightDecay;
  std::vector<cpu::SgdTensor> tensors(k);
  for (size_t t = 0; t < k; ++t)
    tensors[t] = {a.n[t], c.fout(t), c.fin(t), c.fout(k + t)};
  cpu::sgd(h, tensors.data(), k);
  return true;
}

bool launch(KernelCall &c, const args::Collective &a) { return launchCollective(c, a); }
bool launch(KernelCall &c, const args::Wait &a) { return launchWait(c, a); }

/// Launches the kernel whose arguments are A.
template <class A> bool launchAs(KernelCall &c, const KernelArgs &args) {
  return launch(c, args.as<A>());
}

} // namespace

KernelFn cpuKernel(catalogue::KernelId id) {
  // Every kernel of the catalogue has a launch here: one missing fails to compile.
  static const KernelFn table[] = {
#define TESSEL_KERNEL(Id, Name, Family, Doc) &launchAs<args::Id>,
#include "common/catalogue/KernelCatalogue.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == catalogue::kKernelCount);
  return table[static_cast<size_t>(id)];
}

} // namespace tessel::rt
