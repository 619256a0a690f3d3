//===- cuda_rate.cpp - The CUDA kernels' rates on a GPU -------------------===//
//
// Times, on GPU 0, the CUDA backend's attention forward and backward (kernels/cuda: the f32
// kernels, and the tensor-core kernels on bf16) at a few sequence lengths and head sizes, and
// in the same run the products its GEMMs make
// (cuBLASLt on a square product: f32, f32 with TF32, bf16 in with f32 accumulation): the peers
// every rate is a fraction of. FLOPs are counted as tessel-attention-rate counts them: forward
// 4·S·T·D per (batch, head), backward 10·S·T·D (the backward pass here also recomputes the
// forward, which is not counted), causal attention half of each (S·(S+1)/2 score pairs).
// Times are the best of several runs, measured with CUDA events.
//
//   tessel-cuda-rate [--seq 1024,4096,16384] [--batch-heads 8] [--heads 64,128] [--gemm 4096]
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CudaKernels.h"

#include "benchmarks/kernels/CudaBench.h"
#include "runtime/support/CommandLine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace tessel;

namespace {

float *randomDevice(int64_t n, unsigned seed) {
  return bench::randomDevice("tessel-cuda-rate", n, seed);
}
template <class F> float bestMs(F f, int repeats = 5) {
  return bench::bestMs("tessel-cuda-rate", f, repeats);
}

/// Causal attention over one sequence of `seq` positions and `pairs` heads of `head` features.
cuda::AttentionArgs causalAttention(int64_t seq, int64_t pairs, int64_t head) {
  cuda::AttentionArgs at;
  at.batch = 1;
  at.seq = at.kvSeq = seq;
  at.heads = at.kvHeads = pairs;
  at.head = head;
  at.causal = true;
  at.scale = 1.0f / std::sqrt(static_cast<float>(head));
  return at;
}

/// One row of an attention table: the forward and backward times and the rates they give.
void reportAttention(const cuda::AttentionArgs &at, float fwd, float bwd) {
  const double pairs = static_cast<double>(at.seq) * (at.seq + 1) / 2 * at.heads;
  const double d = static_cast<double>(at.head);
  std::printf("  head %3lld seq %6lld  forward %9.3f ms %7.2f TFLOP/s  backward %9.3f ms "
              "%7.2f TFLOP/s  both %7.2f TFLOP/s\n",
              static_cast<long long>(at.head), static_cast<long long>(at.seq), fwd,
              4 * pairs * d / (fwd * 1e-3) / 1e12, bwd, 10 * pairs * d / (bwd * 1e-3) / 1e12,
              14 * pairs * d / ((fwd + bwd) * 1e-3) / 1e12);
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> seqs = {1024, 4096, 16384}, heads = {64, 128};
  int64_t batchHeads = 8, gemmSize = 4096;
  rt::cli::Parser parser(argv[0], "[options]",
                         "Times, on GPU 0, the CUDA backend's attention forward and backward at "
                         "a few sequence lengths and head sizes, against cuBLASLt's square "
                         "products in the same run.");
  parser.integerList("seq", seqs, 1, 1 << 20, "L,...",
                     "sequence lengths (default 1024,4096,16384)");
  parser.integerList("heads", heads, 1, 1024, "D,...", "head sizes (default 64,128)");
  parser.integer("batch-heads", batchHeads, 1, 1 << 20, "N",
                 "sequences times heads per call (default 8)");
  parser.integer("gemm", gemmSize, 1, 1 << 16, "N", "the square product's size (default 4096)");
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("tessel-cuda-rate: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s\n", prop.name);

  std::string why;
  cuda::BlasContext blas;
  blas.lt = cuda::loadBlasLt(why);
  if (!blas.lt || blas.lt->cublasLtCreate(&blas.handle) != CUBLAS_STATUS_SUCCESS) {
    std::printf("tessel-cuda-rate: cuBLASLt: %s\n", why.c_str());
    return 1;
  }
  blas.workspaceBytes = cuda::kBlasWorkspaceBytes;
  cudaMalloc(&blas.workspace, blas.workspaceBytes);
  const int64_t n = gemmSize;
  float *a = randomDevice(n * n, 1), *b = randomDevice(n * n, 2), *c = randomDevice(n * n, 3);
  __nv_bfloat16 *ha = nullptr, *hb = nullptr;
  cudaMalloc(&ha, static_cast<size_t>(n * n) * sizeof(__nv_bfloat16));
  cudaMalloc(&hb, static_cast<size_t>(n * n) * sizeof(__nv_bfloat16));
  cuda::toBf16(n * n, a, ha, nullptr);
  cuda::toBf16(n * n, b, hb, nullptr);
  cuda::GemmArgs g;
  g.m = g.n = g.k = g.lda = g.ldb = g.ldc = n;
  const double gemmFlops = 2.0 * n * n * n;
  // A bf16 result (an activation under mixed precision) over the f32 C's bytes.
  auto *hc = reinterpret_cast<__nv_bfloat16 *>(c);
  for (int variant = 0; variant < 4; ++variant) {
    blas.allowTf32 = variant == 1;
    const float ms = bestMs([&] {
      if (variant == 2)
        cuda::gemmMixed(blas, g, planfile::DType::BF16, ha, hb, planfile::DType::F32, c, nullptr);
      else if (variant == 3)
        cuda::gemmMixed(blas, g, planfile::DType::BF16, ha, hb, planfile::DType::BF16, hc, nullptr);
      else
        cuda::gemm(blas, g, a, b, c, nullptr);
    });
    const char *name[] = {"f32", "f32 (TF32)", "bf16 in, f32 out", "bf16 in, bf16 out"};
    std::printf("gemm %lld^3 %-18s %8.3f ms %8.1f TFLOP/s\n", static_cast<long long>(n),
                name[variant], ms, gemmFlops / (ms * 1e-3) / 1e12);
  }

  std::printf("attention (causal, f32), %lld (batch, head) pairs:\n",
              static_cast<long long>(batchHeads));
  for (int64_t d : heads)
    for (int64_t s : seqs) {
      const cuda::AttentionArgs at = causalAttention(s, batchHeads, d);
      const int64_t elements = s * batchHeads * d;
      float *q = randomDevice(elements, 4), *k = randomDevice(elements, 5),
            *v = randomDevice(elements, 6), *dout = randomDevice(elements, 7),
            *out = randomDevice(elements, 8), *dq = randomDevice(elements, 9),
            *dk = randomDevice(elements, 10), *dv = randomDevice(elements, 11),
            *work = randomDevice(cuda::attentionGradWorkspace(at, /*saved=*/true), 12),
            *lse = randomDevice(s * batchHeads, 13);
      // As a training step runs them: the forward call keeps each row's log-sum-exp, and the
      // backward call reads it with the output.
      const float fwd = bestMs([&] { cuda::attention(at, q, k, v, out, lse, nullptr); });
      const float bwd = bestMs(
          [&] { cuda::attentionGrad(at, q, k, v, dout, out, lse, dq, dk, dv, work, nullptr); });
      reportAttention(at, fwd, bwd);
      for (float *p : {q, k, v, dout, out, dq, dk, dv, work, lse})
        cudaFree(p);
    }

  std::printf("attention (causal, bf16 on the tensor cores), %lld (batch, head) pairs:\n",
              static_cast<long long>(batchHeads));
  for (int64_t d : heads)
    for (int64_t s : seqs) {
      const cuda::AttentionArgs at = causalAttention(s, batchHeads, d);
      if (!cuda::flashAttentionTakes(at)) {
        std::printf("  head %3lld: not taken by the tensor-core kernels\n",
                    static_cast<long long>(d));
        break;
      }
      const int64_t elements = s * batchHeads * d;
      std::vector<uint16_t *> halves;
      for (unsigned seed = 4; seed < 12; ++seed) {
        float *wide = randomDevice(elements, seed);
        uint16_t *half = nullptr;
        if (cudaMalloc(reinterpret_cast<void **>(&half), elements * sizeof(uint16_t)) !=
                cudaSuccess ||
            cuda::narrow(planfile::DType::BF16, elements, wide, half, nullptr) != cudaSuccess) {
          std::fprintf(stderr, "tessel-cuda-rate: cannot make bf16 inputs\n");
          return 1;
        }
        cudaFree(wide);
        halves.push_back(half);
      }
      uint16_t *q = halves[0], *k = halves[1], *v = halves[2], *dout = halves[3],
               *out = halves[4], *dq = halves[5], *dk = halves[6], *dv = halves[7];
      void *work = nullptr;
      float *lse = nullptr;
      if (cudaMalloc(&work, cuda::flashAttentionGradWorkspaceBytes(at, /*saved=*/true)) != cudaSuccess ||
          cudaMalloc(reinterpret_cast<void **>(&lse), s * batchHeads * sizeof(float)) !=
              cudaSuccess) {
        std::fprintf(stderr, "tessel-cuda-rate: cannot allocate the workspace\n");
        return 1;
      }
      cudaError_t failed = cudaSuccess;
      auto check = [&](cudaError_t e) {
        if (e != cudaSuccess)
          failed = e;
      };
      const float fwd = bestMs([&] {
        check(cuda::flashAttention(planfile::DType::BF16, at, q, k, v, out, lse, nullptr));
      });
      const float bwd = bestMs([&] {
        check(cuda::flashAttentionGrad(planfile::DType::BF16, at, q, k, v, dout, out, lse, dq, dk,
                                       dv, work, nullptr));
      });
      if (failed != cudaSuccess) {
        std::fprintf(stderr, "tessel-cuda-rate: bf16 attention failed: %s\n",
                     cudaGetErrorString(failed));
        return 1;
      }
      reportAttention(at, fwd, bwd);
      for (uint16_t *p : halves)
        cudaFree(p);
      cudaFree(work);
      cudaFree(lse);
    }
  return 0;
}
