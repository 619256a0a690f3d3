//===- CostModel.cpp - Time of one kernel or collective on a cluster ------===//

#include "tessel/Analysis/CostModel.h"

#include <algorithm>
#include <cmath>

using namespace tessel;

double cost::gemmFlops(double m, double n, double k, double batch) { return 2 * m * n * k * batch; }

double cost::gemm(const cluster::Cluster &c, double m, double n, double k, double batch,
                  double elementBytes) {
  double flops = gemmFlops(m, n, k, batch);
  double eff = c.gemmEfficiency(batch, m, n, k);
  double bytes = (m * k + k * n + m * n) * batch * elementBytes;
  return std::max(flops / (c.peak(elementBytes) * eff), bytes / c.memoryBandwidth) +
         c.kernelOverhead;
}

double cost::attentionFlops(double batch, double seq, double heads, double visible, double head,
                            bool backward) {
  // Two GEMMs forward (q kᵀ and p v); the backward pass, given the forward call's log-sum-exp,
  // recomputes q kᵀ and computes four more products (dv, dp, dq, dk): 2.5 times the forward.
  return 4 * batch * heads * seq * visible * head * (backward ? 2.5 : 1.0);
}

double cost::attention(const cluster::Cluster &c, double flops, double kvSeq, double elementBytes) {
  return flops / (c.peak(elementBytes) * c.attention.at(kvSeq)) + c.kernelOverhead;
}

double cost::unfusedAttention(const cluster::Cluster &c, double batch, double seq, double heads,
                              double kvSeq, double head, bool backward, double elementBytes,
                              double &flops) {
  double b = batch * heads, scores = b * seq * kvSeq, e = elementBytes;
  // Forward: s = q·kᵀ [seq × kvSeq], p = dropout(softmax(s)), o = p·v [seq × head].
  // Backward: dv = pᵀ·do, dp = do·vᵀ, then dq = ds·k and dk = dsᵀ·q.
  double t = 0;
  flops = 0;
  auto product = [&](double m, double n, double k) {
    t += gemm(c, m, n, k, b, e);
    flops += gemmFlops(m, n, k, b);
  };
  if (!backward) {
    product(seq, kvSeq, head);
    product(seq, head, kvSeq);
    // softmax reads and writes the scores; dropout reads them, writes them and the mask.
    t += memoryBound(c, 2 * scores * e) + memoryBound(c, scores * (2 * e + 1));
    return t;
  }
  product(kvSeq, head, seq);
  product(seq, kvSeq, head);
  product(seq, head, kvSeq);
  product(kvSeq, head, seq);
  // dropout's backward reads the gradient and the mask and writes the gradient; softmax's reads
  // its output and the gradient and writes the gradient.
  t += memoryBound(c, scores * (2 * e + 1)) + memoryBound(c, 3 * scores * e);
  return t;
}

double cost::stash(const cluster::Cluster &c, double inputs, double outputs) {
  double bytes = 2 * 4 * (inputs + outputs);
  return c.stashBandwidth > 0 ? bytes / c.stashBandwidth : 0;
}

double cost::memoryBound(const cluster::Cluster &c, double bytes) {
  return bytes / (c.memoryBandwidth * c.memoryEfficiency) + c.kernelOverhead;
}

cluster::Link cost::crossing(const cluster::Cluster &c, double ranksPerNode) {
  cluster::Link l = c.inter;
  l.bandwidth = std::min(c.intra.bandwidth, c.inter.bandwidth * std::max(1.0, ranksPerNode));
  return l;
}

double cost::allReduce(const cluster::Cluster &c, const cluster::Link &l, double k, double bytes) {
  if (k <= 1)
    return 0;
  double ring = 2 * (k - 1) * l.latency + 2 * (k - 1) / k * bytes / l.bandwidth;
  double tree = 2 * std::ceil(std::log2(k)) * l.latency + 2 * bytes / l.bandwidth;
  return std::min(ring, tree) + c.collectiveOverhead;
}

double cost::gather(const cluster::Cluster &c, const cluster::Link &l, double k, double whole) {
  if (k <= 1)
    return 0;
  return (k - 1) * l.latency + (k - 1) / k * whole / l.bandwidth + c.collectiveOverhead;
}

double cost::broadcast(const cluster::Cluster &c, const cluster::Link &l, double k, double bytes) {
  if (k <= 1)
    return 0;
  return std::ceil(std::log2(k)) * l.latency + bytes / l.bandwidth + c.collectiveOverhead;
}

double cost::send(const cluster::Cluster &c, const cluster::Link &l, double bytes) {
  return l.latency + bytes / l.bandwidth + c.collectiveOverhead;
}
