//===- Calibrate.cpp - tessel-calibrate: this machine as a cluster file ---===//
//
// Measures what the step-time model needs to know of this CPU, with the runtime's own CPU
// kernels and communicators, and prints it as a cluster file (common/cluster/Cluster.h):
//
// Each figure is the mean over repeated runs (what the machine sustains, load included).
//   - the fp32 GEMM rate of kernels/cpu's gemm on square products of 64 .. 1024 and on the
//     shapes of a transformer layer: the best rate is the peak, each size's rate over it the
//     GEMM efficiency table;
//   - the attention kernel's rate by sequence length (causal, 4 heads of 64), as a fraction of
//     that peak;
//   - the memory bandwidth a memory-bound kernel (elementwise add of 3 × 64 MiB) reaches, the
//     share of it a layer's memory-bound kernels reach (norms, GELU, adds, AdamW: on a CPU
//     their arithmetic bounds them as much as memory does), and the fixed time of a kernel
//     call on one element;
//   - all-reduce over the local communicator (ranks as threads): latency from 4-byte messages,
//     bandwidth from 16 MiB ones, both read through the ring formula the model uses;
//   - with --ranks R, every compute and memory figure is what each of R ranks gets while all R
//     run it at once (as the ranks of a `--threads` run do), and the all-reduce is over R
//     ranks: with more ranks × threads than cores, or other work on the machine, the ranks
//     share the cores, and the figures say so;
//   - with --mpi, started under mpirun with 2 processes, the same over the MPI communicator:
//     the inter-node link (on one host it is shared memory, still a process boundary);
//   - with --plan FILE, every distinct GEMM call of that plan, run by the runtime's own gemm
//     handler on operands of the call's sizes (in fp32, as the CPU backend computes), written
//     as measured shapes (`efficiency.gemm.shapes`) that the step-time model takes for exactly
//     those shapes instead of the table by the smallest dim.
//
// `tessel calibrate` runs this (from its own bin directory) and writes the file; the compiler
// itself links none of the runtime, BLAS, OpenMP or MPI. It takes well under 30 s.
//
//===----------------------------------------------------------------------===//

#include "common/catalogue/KernelCatalogue.h"
#include "common/cluster/Cluster.h"
#include "common/plan/PlanFile.h"
#include "kernels/cpu/CpuKernels.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/core/Executor.h"
#include "runtime/device/KernelArgs.h"
#include "runtime/device/cpu/CpuKernelCalls.h"
#include "runtime/support/CommandLine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

using namespace tessel;
using Clock = std::chrono::steady_clock;

namespace {

double now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

/// The mean time of `fn` over repetitions filling about `budget` seconds (at least 5 runs):
/// the wall time over the calls, not the median or the best call. A training step lasts long
/// enough to see what the machine sustains, and a call shorter than a scheduler time slice
/// mostly runs uninterrupted: only the mean over a window sees the share of the cores a rank
/// gets when ranks or other work outnumber the cores.
template <typename Fn> double meanTime(Fn fn, double budget) {
  fn(); // warm caches, thread pools, page mappings
  double start = now();
  int calls = 0;
  while (calls < 5 || now() - start < budget) {
    fn();
    if (++calls > 100000)
      break;
  }
  return (now() - start) / calls;
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
  double t = meanTime([&] { cpu::gemm(g, a.data(), b.data(), c.data()); }, budget);
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
      meanTime([&] { cpu::attention(args, q.data(), k.data(), v.data(), o.data()); }, budget);
  // As the model counts it: 4 b h s (s / 2) d for a causal forward.
  return 4.0 * 4 * static_cast<double>(seq) * (static_cast<double>(seq) / 2) * 64 / t;
}

/// One distinct GEMM call of a plan: its instruction and parameters, how many calls of the
/// plan's programs have exactly these, and the shape the step-time model looks it up by.
struct PlanGemm {
  const planfile::Instr *instr = nullptr;
  catalogue::KernelParams params;
  double calls = 0;
  cluster::GemmShape shape;
};

/// The GEMM calls of `plan`, each distinct call (same parameters, same operand sizes) once.
bool planGemms(const planfile::Plan &plan, std::vector<PlanGemm> &out, std::string &error) {
  const catalogue::KernelInfo *gemm = catalogue::findKernel("gemm");
  std::map<std::string, size_t> seen;
  for (const planfile::Program &program : plan.programs)
    for (const planfile::Instr &in : program.instrs) {
      if (in.kernel != "gemm")
        continue;
      PlanGemm g;
      g.instr = &in;
      if (!catalogue::decodeParams(*gemm, in.attrs, g.params, error)) {
        error = "program '" + program.name + "': gemm: " + error;
        return false;
      }
      const auto &p = std::get<catalogue::Gemm>(g.params);
      std::string key;
      for (int64_t v : p.batch_shape)
        key += std::to_string(v) + ",";
      for (const auto *list : {&p.a_batch_strides, &p.b_batch_strides, &p.c_batch_strides})
        for (int64_t v : *list)
          key += std::to_string(v) + ";";
      for (int64_t v : {p.m, p.n, p.k, int64_t(p.trans_a), int64_t(p.trans_b), p.lda, p.ldb, p.ldc})
        key += std::to_string(v) + " ";
      for (const auto *refs : {&in.inputs, &in.outputs})
        for (const planfile::BufferRef &r : *refs)
          key += std::to_string(r.bytes / planfile::dtypeBytes(r.dtype)) + "e ";
      auto [it, fresh] = seen.try_emplace(key, out.size());
      if (!fresh) {
        out[it->second].calls += 1;
        continue;
      }
      double batch = 1;
      for (int64_t v : p.batch_shape)
        batch *= static_cast<double>(v);
      g.calls = 1;
      g.shape = {batch, static_cast<double>(p.m), static_cast<double>(p.n),
                 static_cast<double>(p.k), 1};
      out.push_back(std::move(g));
    }
  return true;
}

/// The FLOP rate of `g` run by the runtime's CPU gemm handler, on fp32 operands of its
/// operands' element counts.
double planGemmRate(const PlanGemm &g, double budget, std::string &error) {
  std::vector<std::vector<float>> ins, outs;
  rt::KernelCall call;
  call.instr = g.instr;
  for (const planfile::BufferRef &r : g.instr->inputs) {
    uint64_t n = r.bytes / planfile::dtypeBytes(r.dtype);
    ins.push_back(filled(static_cast<size_t>(n)));
    call.inElements.push_back(n);
  }
  for (const planfile::BufferRef &r : g.instr->outputs) {
    uint64_t n = r.bytes / planfile::dtypeBytes(r.dtype);
    outs.emplace_back(static_cast<size_t>(n));
    call.outElements.push_back(n);
  }
  for (auto &v : ins)
    call.in.push_back(v.data());
  for (auto &v : outs)
    call.out.push_back(v.data());
  rt::KernelArgs args;
  rt::KernelFn run = rt::cpuKernel(catalogue::KernelId::Gemm);
  if (!rt::checkKernelCall(call, g.params, args) || !run(call, args)) {
    error = call.error;
    return 0;
  }
  double t = meanTime([&] { run(call, args); }, budget);
  const cluster::GemmShape &s = g.shape;
  return 2.0 * s.batch * s.m * s.n * s.k / t;
}

/// The bytes per second of an elementwise add of three 64 MiB arrays: the memory bandwidth.
double memoryBandwidth(double budget) {
  int64_t n = 16 << 20;
  auto a = filled(static_cast<size_t>(n)), b = filled(static_cast<size_t>(n));
  std::vector<float> y(static_cast<size_t>(n));
  cpu::Shape shape;
  shape.rank = 1;
  shape.size[0] = n;
  cpu::Strides one;
  one.stride[0] = 1;
  double t = meanTime(
      [&] { cpu::binary(cpu::BinaryKind::Add, shape, a.data(), one, b.data(), one, y.data()); },
      budget);
  return 3.0 * 4 * static_cast<double>(n) / t;
}

/// The time of a kernel call on one element: what a call costs beyond its work.
double kernelOverhead(double budget) {
  float x1 = 1, y1 = 0;
  double call = meanTime(
      [&] {
        for (int i = 0; i < 1000; ++i)
          cpu::unary(cpu::UnaryKind::Exp, 1, &x1, &y1);
      },
      budget / 4);
  return call / 1000;
}

/// The share of `bandwidth` a transformer layer's memory-bound kernels reach, their bytes
/// counted as the step-time model counts them (every operand read or written once): layer
/// norm and its gradient and a residual add on 1024 tokens × 512, GELU and its gradient on
/// 1024 × 2048, AdamW on 1M parameters. On a CPU such kernels are bound by their arithmetic
/// (tanh, divisions, row reductions) as much as by memory, so an add alone overstates them.
double memoryEfficiency(double bandwidth, double budget) {
  const int64_t rows = 1024, cols = 512, wide = 4 * cols, params = 1 << 20;
  size_t narrow = static_cast<size_t>(rows * cols), broad = static_cast<size_t>(rows * wide);
  auto x = filled(narrow), dy = filled(narrow), g = filled(cols), b = filled(cols);
  std::vector<float> y(narrow), dx(narrow), dg(cols), db(cols);
  auto xw = filled(broad), dyw = filled(broad);
  std::vector<float> yw(broad), dxw(broad);
  auto param = filled(params), grad = filled(params), m = filled(params), v = filled(params);
  for (float &e : v)
    e = e * e;
  cpu::Shape shape;
  shape.rank = 1;
  shape.size[0] = static_cast<int64_t>(narrow);
  cpu::Strides one;
  one.stride[0] = 1;
  cpu::AdamWArgs adam;
  adam.lr = 1e-4f;
  double t = meanTime(
      [&] {
        cpu::layerNorm(rows, cols, x.data(), g.data(), b.data(), 1e-5f, y.data());
        cpu::layerNormGrad(rows, cols, x.data(), g.data(), dy.data(), 1e-5f, dx.data(), dg.data(),
                           db.data());
        cpu::binary(cpu::BinaryKind::Add, shape, x.data(), one, y.data(), one, dx.data());
        cpu::unary(cpu::UnaryKind::Gelu, rows * wide, xw.data(), yw.data());
        cpu::unaryGrad(cpu::UnaryKind::Gelu, rows * wide, xw.data(), yw.data(), dyw.data(),
                       dxw.data());
        cpu::adamw(adam, params, param.data(), grad.data(), m.data(), v.data());
      },
      budget);
  // Elements moved: norm x, g, b in and y out; its gradient x, g, dy in, dx, dg, db out; the
  // add 3; GELU 2, its gradient x, y, dy in and dx out; AdamW param, grad, m, v in, param, m,
  // v out.
  double n = static_cast<double>(narrow), w = static_cast<double>(broad), c = cols;
  double elements = (2 * n + 2 * c) + (3 * n + 3 * c) + 3 * n + 2 * w + 4 * w + 7.0 * params;
  return std::clamp(4 * elements / (t * bandwidth), 1e-3, 1.0);
}

/// What each of `ranks` ranks measures when they all run `measure` at once, each on its own
/// thread with `threads` compute threads, as the ranks of one process do: the median rank's
/// figure. With more ranks × threads than cores they share the cores, and the figure says by
/// how much each is slowed (other work on the machine included).
template <typename Fn> double perRank(int ranks, int threads, Fn measure) {
  if (ranks <= 1)
    return measure();
  std::vector<double> got(static_cast<size_t>(ranks));
  std::vector<std::thread> workers;
  for (int r = 0; r < ranks; ++r)
    workers.emplace_back([&, r] {
      rt::setComputeThreads(threads);
      got[static_cast<size_t>(r)] = measure();
    });
  for (std::thread &w : workers)
    w.join();
  std::sort(got.begin(), got.end());
  return got[got.size() / 2];
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
  int ranks = 1;
  bool mpi = false, quick = false;
  std::string planPath;
  rt::cli::Parser parser(argv[0], "[options]",
                         "Prints this machine as a cluster file for R ranks of N threads each "
                         "running at once, with the GEMM shapes of a plan measured. `tessel "
                         "calibrate` runs it.");
  parser.integer("threads", threads, 1, 1024, "N", "compute threads per rank (default: every core)");
  parser.integer("ranks", ranks, 1, 1024, "R", "ranks measuring at once (default 1)");
  parser.flag("quick", quick, "shorter measurements (less accurate)");
  parser.text("plan", planPath, "FILE", "also measure the GEMM shapes this plan calls");
  parser.flag("mpi", mpi,
              "under mpirun -n 2: print only 'mpi LATENCY_S BANDWIDTH_BPS' for the MPI "
              "communicator");
  if (std::optional<int> exit = parser.parse(argc, argv))
    return *exit;
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

  // The plan's GEMM calls, read before any measurement so a bad plan fails at once.
  planfile::Plan plan;
  std::vector<PlanGemm> planCalls;
  if (!planPath.empty()) {
    std::ifstream file(planPath, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                               std::istreambuf_iterator<char>());
    std::string error;
    if (!file.good() && !file.eof()) {
      std::fprintf(stderr, "tessel-calibrate: cannot read '%s'\n", planPath.c_str());
      return 1;
    }
    if (!planfile::parsePlan(bytes.data(), bytes.size(), plan, error) ||
        !planGemms(plan, planCalls, error)) {
      std::fprintf(stderr, "tessel-calibrate: %s: %s\n", planPath.c_str(), error.c_str());
      return 1;
    }
  }

  rt::setComputeThreads(threads);
  cluster::Cluster c;
  c.name = "this CPU (" + std::to_string(threads) + " threads per rank" +
           (ranks > 1 ? ", " + std::to_string(ranks) + " ranks at once" : "") + ")";
  c.perNode = 64; // ranks as threads of one process: every group stays "inside the node"

  // GEMM: square sizes for the table, and the best rate as the peak.
  std::vector<std::pair<double, double>> gemm;
  double peak = 0;
  for (int64_t s : {32, 64, 128, 256, 512, 1024}) {
    double r = perRank(ranks, threads, [&] { return gemmRate(s, s, s, budget); });
    gemm.push_back({static_cast<double>(s), r});
    peak = std::max(peak, r);
  }
  // A transformer layer's shape: many rows against a narrow weight.
  peak = std::max(peak, perRank(ranks, threads, [&] { return gemmRate(2048, 768, 768, budget); }));
  // The plan's shapes: a shape's efficiency is the time-weighted rate of the calls that have
  // it (calls of one shape may differ in transposes and strides).
  std::map<std::tuple<double, double, double, double>, std::pair<double, double>> byShape;
  std::vector<cluster::GemmShape> order;
  for (const PlanGemm &g : planCalls) {
    // A call the handler refuses fails here, on one thread, before the ranks measure it.
    std::string error;
    if (!(planGemmRate(g, 0, error) > 0)) {
      std::fprintf(stderr, "tessel-calibrate: %s: a gemm call failed: %s\n", planPath.c_str(),
                   error.c_str());
      return 1;
    }
    double r = perRank(ranks, threads, [&] {
      std::string unused;
      return planGemmRate(g, budget / 4, unused);
    });
    const cluster::GemmShape &s = g.shape;
    double flops = 2.0 * s.batch * s.m * s.n * s.k * g.calls;
    auto [it, fresh] = byShape.try_emplace({s.batch, s.m, s.n, s.k}, 0.0, 0.0);
    if (fresh)
      order.push_back(s);
    it->second.first += flops;
    it->second.second += flops / r;
  }
  for (const cluster::GemmShape &s : order) {
    auto [flops, seconds] = byShape[{s.batch, s.m, s.n, s.k}];
    peak = std::max(peak, flops / seconds);
  }
  c.peak32 = peak;
  c.peak16 = peak; // the CPU backend computes in fp32 whatever the precision
  for (auto [s, r] : gemm)
    c.gemm.points.push_back({s, std::clamp(r / peak, 1e-3, 1.0)});
  for (cluster::GemmShape s : order) {
    auto [flops, seconds] = byShape[{s.batch, s.m, s.n, s.k}];
    s.efficiency = std::clamp(flops / seconds / peak, 1e-3, 1.0);
    c.gemmShapes.push_back(s);
  }

  for (int64_t s : {64, 256, 1024}) {
    double r = perRank(ranks, threads, [&] { return attentionRate(s, budget); });
    c.attention.points.push_back({static_cast<double>(s), std::clamp(r / peak, 1e-3, 1.0)});
  }

  // Memory: the bandwidth of an add over arrays far larger than the caches, and the share of
  // it a layer's memory-bound kernels reach; the fixed cost of a call.
  c.memoryBandwidth = perRank(ranks, threads, [&] { return memoryBandwidth(budget); });
  c.stashBandwidth = c.memoryBandwidth; // a pipelined run keeps its values in host memory
  c.memoryEfficiency =
      perRank(ranks, threads, [&] { return memoryEfficiency(c.memoryBandwidth, budget); });
  c.kernelOverhead = perRank(ranks, threads, [&] { return kernelOverhead(budget); });
  c.memory = 0;
  {
    // Host memory: what the machine has.
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    c.memory = static_cast<double>(pages) * static_cast<double>(size);
  }

  // The local communicator over 2 ranks (or all of them): tiny and 16 MiB all-reduces.
  int64_t large = 4 << 20;
  uint32_t ways = static_cast<uint32_t>(std::clamp(ranks, 2, 8));
  c.intra = linkFrom(localAllReduce(ways, 1, budget), localAllReduce(ways, large, budget),
                     4.0 * static_cast<double>(large), ways);
  c.inter = c.intra; // one host: `tessel calibrate` puts the MPI figures here where it can
  c.collectiveOverhead = 0;

  std::printf("%s", cluster::formatCluster(c, "").c_str());
  return 0;
}
