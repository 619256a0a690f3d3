//===- CudaElementwiseCalls.cpp - Elementwise, row and loss launches ------===//
//
// The CUDA launches of the elementwise kernels (fills, unary and binary ops, copies, dropout,
// the fused elementwise bodies, run generated or interpreted) and of the reductions, softmax,
// norms and cross-entropy over rows.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/CudaCalls.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"
#include "kernels/cuda/FusedSource.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::rt::cudacalls {

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
  return launched(c, cuda::unary(a.op, a.n, typedIn(c, 0), typedOut(c, 0), a.exponent, stream(c)));
}

bool launch(KernelCall &c, const args::UnaryGrad &a) {
  return launched(c, cuda::unaryGrad(a.op, a.n, typedIn(c, 0), typedIn(c, 1), typedIn(c, 2),
                                     typedOut(c, 0), a.exponent, stream(c)));
}

bool launch(KernelCall &c, const args::Where &a) {
  return launched(c, cuda::select(a.shape, typedIn(c, 0), a.cond, typedIn(c, 1), a.a, typedIn(c, 2),
                                  a.b, typedOut(c, 0), stream(c)));
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
  return launched(c, cuda::pack(static_cast<int64_t>(inputs.size()), inputs.data(), a.outers.data(),
                                a.chunks.data(), a.ways, c.fout(0), stream(c)));
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
        widened = widened || planfile::isHalf(b.dtype);
  if (cudaKernel_t generated = widened ? nullptr : cudaLaunchOf(c).fusedKernel(c.instr))
    return launchGenerated(c, a, generated);
  std::vector<const float *> ins;
  std::vector<float *> outs;
  fusedOperands(c, ins, outs);
  return launched(
      c, cuda::fusedElementwise(a.shape, a.steps, ins, a.strides, outs, a.outSteps, stream(c)));
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
  return launched(c, cuda::softmaxGrad(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1), typedOut(c, 0),
                                       stream(c)));
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
  return workspace && launched(c, cuda::rmsNormGrad(a.rows, a.cols, typedIn(c, 0), typedIn(c, 1),
                                                    typedIn(c, 2), a.eps, typedOut(c, 0),
                                                    typedOut(c, 1), workspace, stream(c)));
}

bool launch(KernelCall &c, const args::CrossEntropy &plan) {
  const args::CrossEntropy a = stepLossScale(c, plan);
  float *workspace = scratchFloats(c, cuda::crossEntropyWorkspace(a.rows));
  return workspace &&
         launched(c, cuda::crossEntropy(a.rows, a.cols, typedIn(c, 0), c.ids(1), a.scaled, a.scale,
                                        c.fout(0), workspace, idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::CrossEntropyGrad &plan) {
  const args::CrossEntropy a = stepLossScale(c, plan);
  return launched(c,
                  cuda::crossEntropyGrad(a.rows, a.cols, typedIn(c, 0), c.ids(1), c.fin(2),
                                         a.scaled, a.scale, typedOut(c, 0), idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::CeMax &a) {
  return launched(c, cuda::ceMax(a.rows, a.cols, c.fin(0), c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::CeSums &a) {
  return launched(c, cuda::ceSums(a.rows, a.cols, a.first, a.classes, c.fin(0), c.ids(1), c.fin(2),
                                  c.fout(0), c.fout(1), idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::CeLoss &a) {
  return launched(c, cuda::ceLoss(a.rows, c.fin(0), c.fin(1), c.fin(2), stepLossScale(c, a.scale),
                                  c.fout(0), stream(c)));
}

bool launch(KernelCall &c, const args::CeGrad &a) {
  return launched(c, cuda::ceGrad(a.rows, a.cols, a.first, a.classes, c.fin(0), c.ids(1), c.fin(2),
                                  c.fin(3), c.fin(4), stepLossScale(c, a.scale), c.fout(0),
                                  idError(c), stream(c)));
}

} // namespace tessel::rt::cudacalls
