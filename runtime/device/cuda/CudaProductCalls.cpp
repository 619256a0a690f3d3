//===- CudaProductCalls.cpp - Products, attention and embeddings ----------===//
//
// The CUDA launches of the matrix products (cuBLASLt), attention (whole, ring blocks, paged
// over a KV cache), running sums, rotary positions and embeddings.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CollectiveCalls.h"
#include "runtime/device/HalfOperands.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cuda/CudaCalls.h"
#include "runtime/device/cuda/CudaLaunch.h"

#include "kernels/cuda/CudaKernels.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::rt::cudacalls {

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
    if (!multiplied(
            c, cuda::gemm(blas, a.args, c.fin(0) + ao, c.fin(1) + bo, c.fout(0) + co, stream(c))))
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
    if (!multiplied(c,
                    cuda::gemmMixed(blas, g.args, operandTypeOf(abType),
                                    a + static_cast<size_t>(ao) * abBytes,
                                    b + static_cast<size_t>(bo) * abBytes, operandTypeOf(outType),
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
         launched(c, cuda::attentionBlockGrad(at, c.fin(0), c.fin(1), c.fin(2), c.fin(3), c.fin(4),
                                              c.fin(5), a.first, c.fout(0), c.fout(1), c.fout(2),
                                              workspace, stream(c)));
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
  return launched(
      c, cuda::runningSum(a.a, c.fin(0), c.ids(1), c.ids(2), c.fout(0), c.fout(1), stream(c)));
}

bool launch(KernelCall &c, const args::Rope &a) {
  return launched(c, cuda::rope(a.batch, a.seq, a.heads, a.head, a.theta, a.inverse, typedIn(c, 0),
                                typedOut(c, 0), stream(c), a.headStart, a.tailStart, a.scaling,
                                a.positions ? c.ids(1) : nullptr));
}

bool launch(KernelCall &c, const args::Embedding &a) {
  return launched(c, cuda::embedding(a.n, a.rows, a.cols, a.first, a.vocab, typedIn(c, 0), c.ids(1),
                                     typedOut(c, 0), idError(c), stream(c)));
}

bool launch(KernelCall &c, const args::EmbeddingGrad &a) {
  const size_t bytes = cuda::embeddingGradWorkspace(a.n, a.rows);
  void *workspace = scratchBytes(c, bytes);
  return workspace && launched(c, cuda::embeddingGrad(a.n, a.rows, a.cols, a.first, a.vocab,
                                                      typedIn(c, 0), c.ids(1), typedOut(c, 0),
                                                      workspace, bytes, idError(c), stream(c)));
}

} // namespace tessel::rt::cudacalls
