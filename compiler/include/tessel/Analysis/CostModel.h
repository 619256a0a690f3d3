//===- CostModel.h - Time of one kernel or collective on a cluster -*- C++ -*-===//
//
// The cost primitives of the step-time model (docs/planning.md, "Formulas"), shared by the
// plan-driven prediction (StepTime.h), which applies them to each kernel call of a plan, and by
// the layout tuner (Tune.h), which applies them to a transformer layer's operations worked out
// from the model's dims. Times in seconds, sizes in bytes.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_ANALYSIS_COSTMODEL_H
#define TESSEL_ANALYSIS_COSTMODEL_H

#include "common/cluster/Cluster.h"

namespace tessel::cost {

/// C[batch] = A [m × k] · B [k × n]: 2·m·n·k·batch FLOPs at the peak for `elementBytes` times
/// the GEMM efficiency at min(m, n, k), or the time to move its operands at the memory
/// bandwidth if that is longer; plus the kernel overhead.
double gemm(const cluster::Cluster &c, double m, double n, double k, double batch,
            double elementBytes);
double gemmFlops(double m, double n, double k, double batch);

/// Fused (flash) attention of `batch` sequences, `heads` heads of size `head`, `seq` queries
/// against `kvSeq` keys, each query seeing `visible` keys (kvSeq, or kvSeq / 2 when causal):
/// 4·batch·heads·seq·visible·head FLOPs forward, 2.5 times that backward (from the forward
/// call's log-sum-exp: q·kᵀ again, then dv, dp, dq and dk), at the attention
/// efficiency for kvSeq; plus the kernel overhead.
double attentionFlops(double batch, double seq, double heads, double visible, double head,
                      bool backward);
double attention(const cluster::Cluster &c, double flops, double kvSeq, double elementBytes);

/// The same attention on a cluster whose `attention.kernel` is `unfused`: q·kᵀ and p·v as
/// batched GEMMs over the whole seq × kvSeq scores (the causal mask saves nothing), a
/// scale-mask-softmax and a dropout kernel each reading and writing the scores (dropout also
/// writes a byte of mask per score); backward the four GEMMs of the gradients and the two
/// kernels' backward passes. `flops` receives the GEMMs' FLOPs.
double unfusedAttention(const cluster::Cluster &c, double batch, double seq, double heads,
                        double kvSeq, double head, bool backward, double elementBytes,
                        double &flops);

/// The pipeline runtime's copies around one run of a stage's program (common/layout/PipelineWalk.h):
/// `inputs` elements from its stash into the program's arena and `outputs` elements from the
/// arena into the stash, each a read and a write of a 4-byte float, at `stash.bandwidth`;
/// nothing on a cluster without one.
double stash(const cluster::Cluster &c, double inputs, double outputs);

/// A memory-bound kernel moving `bytes`: bytes / (bandwidth × memory efficiency) + overhead.
double memoryBound(const cluster::Cluster &c, double bytes);

/// The link a ring collective (all-reduce, all-gather, reduce-scatter, broadcast) runs over
/// when its group crosses nodes with `ranksPerNode` of its ranks on each node. NCCL's rings
/// pass through every member's network port, and every group of an SPMD step runs its
/// collective at the same time: the perNode / ranksPerNode groups that cross a node share its
/// perNode ports, so each group gets ranksPerNode ports' bandwidth, at most the intra link's
/// (a full node of 8 A100s with one 200 Gb/s port each: 8 × 24 GB/s; NCCL's target for a node's
/// ports, NVIDIA/nccl-tests#119). A send, and an all-to-all, use the inter link as it is.
cluster::Link crossing(const cluster::Cluster &c, double ranksPerNode);

/// Collectives over k ranks on `link` (α its latency, β its bandwidth), each plus the cluster's
/// collective overhead:
///   all-reduce of B bytes: min(ring 2(k-1)α + 2(k-1)/k·B/β, tree 2⌈log2 k⌉α + 2B/β);
///   all-gather, reduce-scatter, all-to-all of a whole of W bytes: (k-1)α + (k-1)/k·W/β;
///   broadcast of B: ⌈log2 k⌉α + B/β;  a send of B: α + B/β.
double allReduce(const cluster::Cluster &c, const cluster::Link &link, double k, double bytes);
double gather(const cluster::Cluster &c, const cluster::Link &link, double k, double whole);
double broadcast(const cluster::Cluster &c, const cluster::Link &link, double k, double bytes);
double send(const cluster::Cluster &c, const cluster::Link &link, double bytes);

} // namespace tessel::cost

#endif // TESSEL_ANALYSIS_COSTMODEL_H
