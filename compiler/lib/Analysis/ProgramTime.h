//===- ProgramTime.h - The time of one program on one rank ------*- C++ -*-===//
//
// The step-time model is split by concern: ProgramTime.cpp times what one rank runs (each
// kernel call by a roofline, each collective by its α–β cost over the link its group crosses,
// a program on a compute and a communication stream, the replay of recomputed layers and the
// pipeline's stash copies); StepTime.cpp assembles a step from those times (accumulated
// micro-batches, or a simulated pipeline schedule) and its FLOPs; StepTimeReport.cpp prints
// the prediction. This header is what the first two share.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_ANALYSIS_PROGRAMTIME_H
#define TESSEL_ANALYSIS_PROGRAMTIME_H

#include "tessel/Analysis/StepTime.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessel::steptime {

namespace pf = tessel::planfile;
namespace cl = tessel::cluster;

/// The time of one program on one rank, split as the breakdown needs it.
struct ProgramTime {
  double total = 0, compute = 0, recompute = 0, hidden = 0;
  /// Per instruction, the time at which it ends (the compute stream's clock then).
  std::vector<double> ends;
  std::map<std::string, double> exposed;
  double modelFlops = 0, hardwareFlops = 0;
  std::map<std::string, KernelCost> kernels;

  void add(const ProgramTime &o, double times) {
    for (const auto &[name, k] : o.kernels) {
      kernels[name].seconds += k.seconds * times;
      kernels[name].calls += k.calls * times;
    }
    total += o.total * times;
    compute += o.compute * times;
    recompute += o.recompute * times;
    hidden += o.hidden * times;
    for (const auto &[g, t] : o.exposed)
      exposed[g] += t * times;
    modelFlops += o.modelFlops * times;
    hardwareFlops += o.hardwareFlops * times;
  }
};

/// The cost of what one rank of a plan runs on a cluster: kernel calls, collectives, whole
/// programs.
class Model {
public:
  Model(const pf::Plan &plan, const cl::Cluster &c);

  double elementBytes() const { return elementBytes_; }

  /// The link group `name`'s instances use: intra-node when the instance holding `rank` has
  /// all its ranks on one node (ranks are numbered row-major over the mesh and a node holds
  /// perNode consecutive ranks, so tp as the innermost axis stays inside a node). A send uses
  /// it as it is.
  const cl::Link &linkOf(const std::string &name, uint32_t rank);

  /// The link a ring collective of group `name` runs over from `rank`: the intra link inside a
  /// node; across nodes, the network ports of the group's ranks on each node (cost::crossing).
  cl::Link collectiveLink(const std::string &name, uint32_t rank);

  double groupSize(const pf::Instr &in, const std::string &group) const;

  /// α–β time of one collective on `rank`, over the link its group crosses.
  double collectiveTime(const pf::Instr &in, uint32_t rank);

  /// Roofline time of one kernel call; `flops` receives its GEMM and attention FLOPs.
  double kernelTime(const pf::Instr &in, double &flops);

  /// Runs `program` on a compute stream and a communication stream: a collective with an
  /// event runs beside the compute from its start until its `wait`; one without waits for
  /// the communication stream (the communicator runs one rank's operations in issue order)
  /// and blocks the compute stream.
  ProgramTime time(const pf::Program &program, uint32_t rank);

  /// What replaying each recomputed layer's whole forward pass (`recompute.replay = layer`, as
  /// Megatron-LM's CheckpointFunction does) adds to `backward` over the plan's recomputation,
  /// which runs again only what the backward pass reads. The plan's recomputed kernels of a
  /// layer copy a prefix of the layer's forward kernels; the forward kernels from the end of
  /// one layer's prefix to the start of the next layer's are what the replay adds (for GPT: the
  /// second MLP product, its tp all-reduce and the residual add). They are found in `forward`
  /// (the stage's forward program, or `backward` itself without a pipeline, before its first
  /// recomputed kernel) by the signatures of the first recomputed run; with fewer than two
  /// layers there, or not one recomputed run per layer found, where a layer ends is unknown and
  /// nothing is added. The added kernels count as recomputation, their collectives as exposed
  /// communication.
  ProgramTime replayOf(const pf::Program &forward, const pf::Program &backward, uint32_t rank);

  /// The pipeline runtime's copies around one run of a stage's program (cost::stash): its
  /// inputs that are not host data from the stash, its outputs that are not host data into it.
  double stashTime(const std::string &name, uint32_t stage) const;

  const pf::Program *programOf(const std::string &name, uint32_t stage) const;

  /// The time of program `name` of `stage` on `rank`, with what a whole-layer replay adds to
  /// its recomputation (`forward`: the program holding the layers' forward kernels, the same
  /// program when empty).
  ProgramTime timeOf(const std::string &name, uint32_t stage, uint32_t rank,
                     const std::string &forward = "");

private:
  const pf::Plan &plan_;
  const cl::Cluster &c_;
  double elementBytes_ = 4;
  bool fullRecompute_ = false;

  /// Whether the instance of a group holding a rank spans nodes, and how many of its ranks
  /// share that rank's node.
  struct Route {
    bool crosses = false;
    double perNode = 1;
  };
  Route routeOf(const std::string &name, uint32_t rank);
  std::map<std::pair<std::string, uint32_t>, Route> routes_;
};

} // namespace tessel::steptime

#endif // TESSEL_ANALYSIS_PROGRAMTIME_H
