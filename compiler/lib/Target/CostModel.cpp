//===- CostModel.cpp - Time of one kernel or collective on a cluster ------===//

#include "tessel/Target/CostModel.h"

#include <algorithm>
#include <cmath>

using namespace tessel;

double cost::gemmFlops(double m, double n, double k, double batch) { return 2 * m * n * k * batch; }

double cost::gemm(const cluster::Cluster &c, double m, double n, double k, double batch,
                  double elementBytes) {
  double flops = gemmFlops(m, n, k, batch);
  double eff = c.gemm.at(std::min({m, n, k}));
  double bytes = (m * k + k * n + m * n) * batch * elementBytes;
  return std::max(flops / (c.peak(elementBytes) * eff), bytes / c.memoryBandwidth) +
         c.kernelOverhead;
}

double cost::attentionFlops(double batch, double seq, double heads, double visible, double head,
                            bool backward) {
  // Two GEMMs forward (q kᵀ and p v); the backward pass recomputes q kᵀ and computes three
  // more products: 2.5 times the forward.
  return 4 * batch * heads * seq * visible * head * (backward ? 2.5 : 1.0);
}

double cost::attention(const cluster::Cluster &c, double flops, double kvSeq, double elementBytes) {
  return flops / (c.peak(elementBytes) * c.attention.at(kvSeq)) + c.kernelOverhead;
}

double cost::memoryBound(const cluster::Cluster &c, double bytes) {
  return bytes / (c.memoryBandwidth * c.memoryEfficiency) + c.kernelOverhead;
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
