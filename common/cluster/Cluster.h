//===- Cluster.h - What a cluster of accelerators can do ---------*- C++ -*-===//
//
// A cluster description says what the step-time model (`tessel estimate --cluster`,
// `tessel tune`) needs to know of the machines a plan will run on: the accelerator's dense
// peak rates, memory and memory bandwidth, how many accelerators share a node, the two links
// (inside a node and between nodes) as bandwidth and latency, and how close to the peak kernels
// of each kind come, by shape. It is a small text file (docs/planning.md, "Cluster files"):
//
//   # A100 80GB SXM, NVIDIA datasheet
//   name = "A100 80GB SXM"
//   accelerator.bf16 = 312 TFLOP/s
//   accelerator.memory = 80 GiB
//   node.accelerators = 8
//   intra.bandwidth = 300 GB/s
//   efficiency.gemm = 128:0.35 1024:0.75 8192:0.82
//
// Shipped presets live in clusters/; `tessel calibrate` measures one for this machine. Plain
// C++: the compiler reads these files and the runtime's calibration tool writes them.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_CLUSTER_CLUSTER_H
#define TESSEL_COMMON_CLUSTER_CLUSTER_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessel::cluster {

/// Efficiency (a fraction of the peak) as a function of a size: points (size, efficiency) with
/// sizes ascending; between points it is interpolated linearly in log(size), outside them it is
/// the nearest point's.
struct EfficiencyTable {
  std::vector<std::pair<double, double>> points;
  double at(double size) const;
};

/// The efficiency measured on one GEMM shape as a plan calls it: `batch` products of m × n
/// over k (the product of the call's batch shape). `tessel calibrate --model` measures the
/// shapes of a model's plan, which the table by the smallest dim cannot tell apart (on a CPU a
/// 512 × 384 × 1152 product runs a fifth slower than a 2048 × 384 × 384 one).
struct GemmShape {
  double batch = 1, m = 0, n = 0, k = 0;
  double efficiency = 1;
};

/// A link as one accelerator sees it: the bandwidth it can send at in one direction while
/// receiving at the same rate, and the latency of one message.
struct Link {
  double bandwidth = 0; ///< bytes/s
  double latency = 0;   ///< s
};

struct Cluster {
  std::string name;
  /// What the CUDA runtime's device name contains for this accelerator ("H100" in "NVIDIA H100
  /// 80GB HBM3"), so a runner on such a device reports MFU against this preset's peak
  /// (common/cluster/AcceleratorPeaks.h); empty for clusters that are not a GPU preset.
  std::string device;
  /// Dense peak rates in FLOP/s: 16-bit (bf16/fp16 on tensor cores) and fp32.
  double peak16 = 0, peak32 = 0;
  double memory = 0;          ///< bytes per accelerator
  double memoryBandwidth = 0; ///< bytes/s
  int64_t perNode = 1;        ///< accelerators per node
  Link intra, inter;
  /// GEMM efficiency by the smallest of m, n and k; attention (flash) efficiency by the key
  /// sequence length; the fraction of the memory bandwidth memory-bound kernels reach.
  EfficiencyTable gemm, attention;
  /// Measured GEMM shapes, which take precedence over the table for exactly those shapes.
  std::vector<GemmShape> gemmShapes;
  double memoryEfficiency = 1;
  /// How attention runs: one fused (flash) kernel timed by the attention table, or, as
  /// Megatron-LM ran it before fused kernels, two batched GEMMs (q·kᵀ and p·v, timed by the GEMM
  /// table over the whole s × s scores, causal or not) with a scale-mask-softmax and a dropout
  /// kernel that each read and write the scores.
  bool unfusedAttention = false;
  /// What a full recomputation runs again in the backward pass: what the backward pass reads
  /// (the plan's recomputed kernels, `needed`), or, as Megatron-LM's CheckpointFunction does
  /// (`layer`), each layer's whole forward pass, so also the layer's last kernels whose results
  /// only the next layer reads (GPT's second MLP product, its tp all-reduce, the residual add).
  bool replayWholeLayer = false;
  /// The rate at which a pipelined run copies the values between a stage's programs into and
  /// out of its stash (common/layout/PipelineWalk.h, in the rank's device memory), in bytes/s: the
  /// memory bandwidth on the CPU backend. 0: the copies cost nothing (the GPU presets, where
  /// they run at the memory bandwidth and are small beside a stage's kernels).
  double stashBandwidth = 0;
  /// Fixed time per kernel (launch and framework overhead) and per collective call.
  double kernelOverhead = 0, collectiveOverhead = 0;

  /// The peak rate for an element size of `bytes` (2: 16-bit, 4: fp32).
  double peak(double bytes) const { return bytes <= 2 ? peak16 : peak32; }
  /// The efficiency of `batch` m × n × k products: the measured shape's, else the table's at
  /// the smallest dim.
  double gemmEfficiency(double batch, double m, double n, double k) const;
};

/// Parses a cluster file. On a problem returns false with "file:line:col: error: reason" in
/// `error`: an unknown key, a key given twice, a number without the unit its key needs (or
/// with another), a value that is not positive, an efficiency outside (0, 1], table sizes not
/// ascending, a required key missing (reported at the end of the file).
bool parseCluster(const std::string &text, const std::string &file, Cluster &out,
                  std::string &error);

/// The file text of `c`, which parseCluster reads back to the same figures; `header` is written
/// first as comment lines.
std::string formatCluster(const Cluster &c, const std::string &header);

} // namespace tessel::cluster

#endif // TESSEL_COMMON_CLUSTER_CLUSTER_H
