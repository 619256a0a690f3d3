//===- Calibrate.cpp - tessel-calibrate: this machine as a cluster file ---===//
//
// Measures what the step-time model needs to know of this CPU, with the runtime's own CPU
// kernels and communicators, and prints it as a cluster file (common/Cluster.h):
//
// Each figure is the median of repeated runs (what the machine sustains, load included).
//   - the fp32 GEMM rate of kernels/cpu's gemm on square products of 64 .. 1024 and on the
//     shapes of a transformer layer: the best rate is the peak, each size's rate over it the
//     GEMM efficiency table;
//   - the attention kernel's rate by sequence length (causal, 4 heads of 64), as a fraction of
//     that peak;
//   - the memory bandwidth a memory-bound kernel (elementwise add of 3 × 64 MiB) reaches, and
//     the fixed time of a kernel call on one element;
//   - all-reduce over the local communicator (ranks as threads): latency from 4-byte messages,
//     bandwidth from 16 MiB ones, both read through the ring formula the model uses;
//   - with --mpi, started under mpirun with 2 processes, the same over the MPI communicator:
//     the inter-node link (on one host it is shared memory, still a process boundary).
//
// `tessel calibrate` runs this (from its own bin directory) and writes the file; the compiler
// itself links none of the runtime, BLAS, OpenMP or MPI. It takes well under 30 s.
//
//===----------------------------------------------------------------------===//

#include "common/Cluster.h"
#include "kernels/cpu/CpuKernels.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/core/Executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace tessel;
using Clock = std::chrono::steady_clock;

namespace {

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

/// The median time of `fn` over repetitions filling about `budget` seconds (at least 5 runs).
/// The median, not the best: a training run lasts long enough to see what the machine
/// sustains, interruptions by other work included, not its best moment.
template <typename Fn> double medianTime(Fn fn, double budget) {
  fn(); // warm caches, thread pools, page mappings
  std::vector<double> times;
  double start = now();
  for (int i = 0; i < 5 || now() - start < budget; ++i) {
    double t0 = now();
    fn();
    times.push_back(now() - t0);
    if (i > 1000)
      break;
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<float> filled(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  return v;
}

double gemmRate(int64_t m, int64_t n, int64_t k, double budget) {
  auto a = filled(static_cast<size_t>(m * k)), b = filled(static_cast<size_t>(k * n));
  std::vector<float> c(static_cast<size_t>(m * n));
  cpu::GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.lda = k, g.ldb = n, g.ldc = n;
  double t = medianTime([&] { cpu::gemm(g, a.data(), b.data(), c.data()); }, budget);
  return 2.0 * static_cast<double>(m * n * k) / t;
}

double attentionRate(int64_t seq, double budget) {
  cpu::AttentionArgs args;
  args.batch = 1, args.seq = seq, args.kvSeq = seq, args.heads = 4, args.kvHeads = 4;
  args.head = 64, args.causal = true, args.scale = 0.125f;
  size_t n = static_cast<size_t>(seq * 4 * 64);
  auto q = filled(n), k = filled(n), v = filled(n);
  std::vector<float> o(n);
  double t =
      medianTime([&] { cpu::attention(args, q.data(), k.data(), v.data(), o.data()); }, budget);
  // As the model counts it: 4 b h s (s / 2) d for a causal forward.
  return 4.0 * 4 * static_cast<double>(seq) * (static_cast<double>(seq) / 2) * 64 / t;
}

/// One rank's all-reduce time of `n` floats, on a world of `ranks` threads.
double localAllReduce(uint32_t ranks, int64_t n, double budget) {
  auto world = rt::LocalCommunicator::createWorld(ranks);
  rt::CommGroup groups[8];
  for (uint32_t r = 0; r < ranks; ++r) {
    for (uint32_t i = 0; i < ranks; ++i)
      groups[r].ranks.push_back(i);
    groups[r].index = r;
  }
  std::vector<std::vector<float>> x(ranks, filled(static_cast<size_t>(n))), y = x;
  std::vector<double> rates;
  for (int round = 0, rounds = std::max(5, static_cast<int>(budget / 0.01)); round < rounds;
       ++round) {
    std::vector<double> took(ranks);
    std::vector<std::thread> threads;
    for (uint32_t r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        std::string error;
        double t0 = now();
        for (int i = 0; i < 10; ++i)
          world[r]->allReduce(groups[r], rt::ReduceOp::Sum, x[r].data(), y[r].data(), n, error);
        took[r] = (now() - t0) / 10;
      });
    for (auto &t : threads)
      t.join();
    rates.push_back(*std::max_element(took.begin(), took.end()));
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

/// Latency and bandwidth from the all-reduce times of a tiny and a large message on k ranks,
/// read through the ring formula t = 2(k-1) α + 2 (k-1)/k · bytes / β.
cluster::Link linkFrom(double tiny, double large, double largeBytes, double k) {
  cluster::Link l;
  l.latency = std::max(1e-9, tiny / (2 * (k - 1)));
  double transfer = std::max(1e-9, large - 2 * (k - 1) * l.latency);
  l.bandwidth = 2 * (k - 1) / k * largeBytes / transfer;
  return l;
}

} // namespace

int main(int argc, char **argv) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool mpi = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--mpi")
      mpi = true;
    else if (a == "--quick")
      quick = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--quick] [--mpi]\n"
                   "  prints this machine as a cluster file; --mpi (under mpirun -n 2) prints\n"
                   "  only 'mpi LATENCY_S BANDWIDTH_BPS' for the MPI communicator\n",
                   argv[0]);
      return 2;
    }
  }
  double budget = quick ? 0.05 : 0.4;
  if (mpi) {
    std::string error;
    if (!rt::mpi::initialize(error)) {
      std::fprintf(stderr, "tessel-calibrate: %s\n", error.c_str());
      return 1;
    }
    auto comm = rt::mpi::createCommunicator(error);
    if (!comm) {
      std::fprintf(stderr, "tessel-calibrate: %s\n", error.c_str());
      return 1;
    }
    rt::CommGroup group;
    for (uint32_t r = 0; r < comm->worldSize(); ++r)
      group.ranks.push_back(r);
    group.index = comm->rank();
    double k = static_cast<double>(comm->worldSize());
    auto timeOf = [&](int64_t n) {
      auto x = filled(static_cast<size_t>(n)), y = x;
      double best = 1e30;
      for (int round = 0; round < 20; ++round) {
        double t0 = now();
        for (int i = 0; i < 10; ++i)
          comm->allReduce(group, rt::ReduceOp::Sum, x.data(), y.data(), n, error);
        best = std::min(best, (now() - t0) / 10);
      }
      return best;
    };
    int64_t large = 4 << 20;
    cluster::Link l = linkFrom(timeOf(1), timeOf(large), 4.0 * static_cast<double>(large), k);
    if (comm->rank() == 0)
      std::printf("mpi %.9g %.9g\n", l.latency, l.bandwidth);
    comm.reset();
    rt::mpi::finalize();
    return 0;
  }

  rt::setComputeThreads(threads);
  cluster::Cluster c;
  c.name = "this CPU (" + std::to_string(threads) + " threads per rank)";
  c.perNode = 64; // ranks as threads of one process: every group stays "inside the node"

  // GEMM: square sizes for the table, and the best rate as the peak.
  std::vector<std::pair<double, double>> gemm;
  double peak = 0;
  for (int64_t s : {32, 64, 128, 256, 512, 1024}) {
    double r = gemmRate(s, s, s, budget);
    gemm.push_back({static_cast<double>(s), r});
    peak = std::max(peak, r);
  }
  // A transformer layer's shape: many rows against a narrow weight.
  peak = std::max(peak, gemmRate(2048, 768, 768, budget));
  c.peak32 = peak;
  c.peak16 = peak; // the CPU backend computes in fp32 whatever the precision
  for (auto [s, r] : gemm)
    c.gemm.points.push_back({s, std::clamp(r / peak, 1e-3, 1.0)});

  for (int64_t s : {64, 256, 1024})
    c.attention.points.push_back(
        {static_cast<double>(s), std::clamp(attentionRate(s, budget) / peak, 1e-3, 1.0)});

  // Memory: an elementwise add of three 64 MiB arrays moves 3 × 64 MiB.
  {
    int64_t n = 16 << 20;
    auto a = filled(static_cast<size_t>(n)), b = filled(static_cast<size_t>(n));
    std::vector<float> y(static_cast<size_t>(n));
    cpu::Shape shape;
    shape.rank = 1;
    shape.size[0] = n;
    cpu::Strides one;
    one.stride[0] = 1;
    double t = medianTime(
        [&] { cpu::binary(cpu::BinaryKind::Add, shape, a.data(), one, b.data(), one, y.data()); },
        budget);
    c.memoryBandwidth = 3.0 * 4 * static_cast<double>(n) / t;
    c.memoryEfficiency = 1; // the bandwidth is what such a kernel reaches
    float x1 = 1, y1 = 0;
    double call = medianTime(
        [&] {
          for (int i = 0; i < 1000; ++i)
            cpu::unary(cpu::UnaryKind::Exp, 1, &x1, &y1);
        },
        budget / 4);
    c.kernelOverhead = call / 1000;
  }
  c.memory = 0;
  {
    // Host memory: what the machine has.
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    c.memory = static_cast<double>(pages) * static_cast<double>(size);
  }

  // The local communicator over 2 ranks: tiny and 16 MiB all-reduces.
  int64_t large = 4 << 20;
  c.intra = linkFrom(localAllReduce(2, 1, budget), localAllReduce(2, large, budget),
                     4.0 * static_cast<double>(large), 2);
  c.inter = c.intra; // one host: `tessel calibrate` puts the MPI figures here where it can
  c.collectiveOverhead = 0;

  std::printf("%s", cluster::formatCluster(c, "").c_str());
  return 0;
}
