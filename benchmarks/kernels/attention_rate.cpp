//===- attention_rate.cpp - CPU attention against the GEMM rate -----------===//
//
// Times the CPU backend's attention forward and backward (kernels/cpu) at a few sequence
// lengths and, in the same run, the batched matrix product the step's GEMMs use (the kernels'
// `gemm`, OpenBLAS underneath) on a square product of the same thread count: the peer every
// attention rate is a fraction of. FLOPs are the work done: forward 4·S·T·D per (batch, head)
// (scores and their product with the values), backward 10·S·T·D (the scores again, then dP,
// dQ, dK and dV); causal attention does about half of each and is counted so (S·(S+1)/2
// score pairs instead of S·T).
//
//   tessel-attention-rate [--threads N] [--seq 256,1024,4096] [--batch-heads 12] [--head 64]
//
//===----------------------------------------------------------------------===//

#include "kernels/cpu/CpuKernels.h"
#include "runtime/support/CommandLine.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace tessel::cpu;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The best seconds of `f` over repeats filling about `budget` seconds (at least 3).
template <class F> double best(F f, double budget = 1.5) {
  f(); // Warm-up: page faults, thread pool.
  double bestTime = 1e30, spent = 0;
  for (int i = 0; i < 3 || spent < budget; ++i) {
    double t0 = now();
    f();
    double t = now() - t0;
    bestTime = std::min(bestTime, t);
    spent += t;
    if (i > 200)
      break;
  }
  return bestTime;
}

std::vector<float> randomVector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

} // namespace

int main(int argc, char **argv) {
  int threads = omp_get_max_threads();
  std::vector<int64_t> seqs = {256, 1024, 4096};
  int64_t pairs = 12, head = 64;
  tessel::rt::cli::Parser parser(argv[0], "[options]",
                                 "The CPU attention kernel's rate, forward and backward, "
                                 "against a square GEMM's on the same threads.");
  parser.integer("threads", threads, 1, 1024, "N", "OpenMP threads (default: every core)");
  parser.integerList("seq", seqs, 1, 1 << 20, "L,...", "sequence lengths (default 256,1024,4096)");
  parser.integer("batch-heads", pairs, 1, 1 << 20, "N",
                 "sequences times heads per call (default 12)");
  parser.integer("head", head, 1, 1024, "D", "the head dim (default 64)");
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
  omp_set_num_threads(threads);

  // The peer: a square product of the step's GEMM path.
  const int64_t n = 2048;
  std::vector<float> a = randomVector(n * n, 1), b = randomVector(n * n, 2), c(n * n);
  GemmArgs g;
  g.m = g.n = g.k = n;
  g.lda = g.ldb = g.ldc = n;
  double gemmSeconds = best([&] { gemm(g, a.data(), b.data(), c.data()); });
  double gemmRate = 2.0 * n * n * n / gemmSeconds / 1e9;
  std::printf("threads %d; attention kernel: %s\n", threads, isaVariant());
  std::printf("gemm %lldx%lldx%lld: %.1f GFLOP/s (the peer)\n", static_cast<long long>(n),
              static_cast<long long>(n), static_cast<long long>(n), gemmRate);
  std::printf("%-6s %-7s %5s %10s %10s %10s %10s\n", "seq", "mask", "head", "fwd GF/s", "of gemm",
              "bwd GF/s", "of gemm");
  for (int64_t S : seqs)
    for (bool causal : {false, true}) {
      // batch x heads pairs, fewer at long sequences so a case stays within memory and time.
      const int64_t heads = std::max<int64_t>(2, pairs * 256 / std::max<int64_t>(S, 256));
      AttentionArgs args;
      args.batch = 1;
      args.seq = args.kvSeq = S;
      args.heads = args.kvHeads = heads;
      args.head = head;
      args.causal = causal;
      args.scale = 1.0f / std::sqrt(static_cast<float>(head));
      const size_t elems = static_cast<size_t>(S * heads * head);
      std::vector<float> q = randomVector(elems, 3), k = randomVector(elems, 4),
                         v = randomVector(elems, 5), dout = randomVector(elems, 6), out(elems),
                         dq(elems), dk(elems), dv(elems);
      const double scorePairs = causal ? S * (S + 1) / 2.0 : static_cast<double>(S) * S;
      const double unit = scorePairs * head * heads;
      double fwd = best([&] { attention(args, q.data(), k.data(), v.data(), out.data()); });
      double bwd = best([&] {
        attentionGrad(args, q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(),
                      dv.data());
      });
      double fwdRate = 4 * unit / fwd / 1e9, bwdRate = 10 * unit / bwd / 1e9;
      std::printf("%-6lld %-7s %5lld %10.1f %9.0f%% %10.1f %9.0f%%\n", static_cast<long long>(S),
                  causal ? "causal" : "none", static_cast<long long>(head), fwdRate,
                  100 * fwdRate / gemmRate, bwdRate, 100 * bwdRate / gemmRate);
    }
  return 0;
}
