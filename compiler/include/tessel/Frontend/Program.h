//===- Program.h - The analysed model: typed graph and configuration -*- C++ -*-===//
//
// Semantic analysis elaborates a `.model` file into a Program: every block instantiated, every
// dim sized, every op typed over named dims, and the parallel and training settings checked.
// IR emission translates the graph one op to one graph-dialect op; nothing here depends on
// MLIR, so the whole front end can be fuzzed on its own.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_FRONTEND_PROGRAM_H
#define TESSEL_FRONTEND_PROGRAM_H

#include "tessel/Frontend/Source.h"
#include "tessel/Shape/NamedShape.h"

#include "common/support/DType.h"

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tessel {

/// Element types are the plan's (common/support/DType.h, header-only).
using planfile::DType;
using planfile::dtypeName;
using planfile::isFloat;

struct TensorType {
  DType dtype = DType::F32;
  NamedShape dims;
};

/// How a parameter is initialised.
struct InitSpec {
  enum Kind { Normal, Uniform, Zeros, Ones, Constant, Load };
  Kind kind = Normal;
  double a = 0.0;  ///< Normal: mean; Uniform: low; Constant: value.
  double b = 0.02; ///< Normal: std; Uniform: high.
  /// Load: the stored tensor's name in the weights the run starts from (`{layer}` already
  /// replaced by the repeated layer's index), and which part of it: empty for all of it, else
  /// {part, parts, axis, rows}: the first `rows` entries of its first dim (-1: all), cut into
  /// `parts` equal pieces along `axis`, piece `part`.
  std::string source = {};
  std::vector<int64_t> slice = {};
};
const char *initKindName(InitSpec::Kind kind);

using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<std::string>, InitSpec>;

/// One typed operation. Its result is value number `inputs.size() + index` in the graph.
struct Op {
  std::string name; ///< The graph-dialect op name without prefix: "contract", "add", ...
  std::vector<int> operands;
  TensorType type;
  std::vector<std::pair<std::string, AttrValue>> attrs;
  SourceLoc loc;
  /// Block instantiation sites, innermost first.
  std::vector<SourceLoc> callers;
  /// Index of the repeated layer the op belongs to, or -1 outside `repeat`.
  int layer = -1;
};

struct GraphInput {
  std::string name;
  TensorType type;
  SourceLoc loc;
};

/// The forward computation at global shapes, ending in a scalar loss.
struct Graph {
  std::vector<GraphInput> inputs;
  std::vector<Op> ops;
  /// The loss: the cross-entropy, plus the terms of `add_loss` when there are any.
  int result = -1;

  const TensorType &typeOf(int value) const {
    return value < static_cast<int>(inputs.size()) ? inputs[value].type
                                                   : ops[value - inputs.size()].type;
  }
};

/// A setting's value with the place it was written, for diagnostics in later stages.
template <typename T> struct Located {
  T value{};
  SourceLoc loc;
};

struct MeshAxis {
  std::string name; ///< One of pp, dp, ep, cp, tp.
  int64_t size = 1;
  SourceLoc loc;
};

struct DimSharding {
  std::string dim;
  std::vector<std::string> axes;
  SourceLoc loc;
};

struct ParallelConfig {
  std::vector<MeshAxis> mesh;
  std::vector<DimSharding> shard;
  Located<bool> sequenceParallel{false, {}};
  Located<int64_t> zero{0, {}};
  Located<std::string> schedule{"1f1b", {}}; ///< afab, 1f1b, interleaved, zbh1.
  Located<int64_t> microbatches{0, {}};      ///< 0: equal to the accumulation steps.
  Located<int64_t> virtualStages{1, {}};
  /// Explicit layer indices per stage; empty for a balanced split.
  Located<std::vector<std::vector<int64_t>>> stageMap;
  Located<std::string> recompute{"none", {}}; ///< none, selective, full.
  /// How attention meets the keys of other cp ranks: allgather (gather them whole) or ring
  /// (pass them around the cp ring).
  Located<std::string> context{"allgather", {}};
  SourceLoc pipelineLoc; ///< Where the `pipeline { ... }` group is written, if it is.
  Located<int64_t> bucketBytes{25ll << 20, {}};
  Located<bool> overlap{true, {}};

  /// The size of `axis`, 1 when the mesh lacks it.
  int64_t axisSize(const std::string &axis) const;
  int64_t worldSize() const;
  /// The ranks among which the batch is split: dp x ep (expert parallelism splits the tokens
  /// as data parallelism does, and only the expert weights otherwise).
  int64_t dataWays() const { return axisSize("dp") * axisSize("ep"); }
};

struct OptimizerConfig {
  std::string kind = "adamw"; ///< adamw, adam, sgd.
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0;
  /// The parameter classes weight decay falls on (tessel/Dialect/Graph/Transforms/ParameterClasses.h):
  /// by default the matrices, weights and embeddings, as nanoGPT and llm.c decay them.
  std::vector<std::string> decay{"weights", "embeddings"};
  SourceLoc loc;
};

struct LrSchedule {
  std::string kind = "constant"; ///< constant, cosine, linear.
  int64_t warmup = 0;
  double minLr = 0.0;
  SourceLoc loc;
};

struct TrainConfig {
  Located<int64_t> batch{0, {}};      ///< Sequences per optimizer step, over all data ranks.
  Located<int64_t> microBatch{0, {}}; ///< Sequences per rank per forward/backward.
  int64_t accumulation = 1;           ///< batch / (micro_batch * dp * ep).
  Located<int64_t> steps{1000, {}};
  OptimizerConfig optimizer;
  LrSchedule schedule;
  Located<double> clip{0.0, {}}; ///< Max global gradient norm; 0 disables clipping.
  Located<std::string> precision{"fp32", {}};
  Located<std::string> data{"", {}};
  Located<std::string> tokenizer{"byte", {}};
  Located<int64_t> seed{1337, {}};
  Located<int64_t> evalEvery{0, {}};
  Located<int64_t> evalBatches{8, {}};
  Located<double> evalFraction{0.1, {}}; ///< Held out of `data` when no evalData is given.
  Located<std::string> evalData{"", {}};   ///< A separate validation set (val.bin).
  Located<int64_t> checkpointEvery{0, {}};
  Located<std::string> checkpointDir{"", {}};
  Located<int64_t> logEvery{1, {}};
  /// Pretrained weights the run starts from (a Hugging Face folder or a checkpoint).
  Located<std::string> initFrom{"", {}};
};

struct Program {
  std::string modelName;
  SourceLoc modelLoc;
  /// Every dim of the model with its size, in definition order (`batch` included).
  NamedShape dims;
  /// The repeated layer count (the `repeat` in forward), 0 when there is none.
  int64_t layers = 0;
  SourceLoc layersLoc;
  Graph forward;
  ParallelConfig parallel;
  TrainConfig train;
};

/// What a mixture of experts makes of a model's parameters: all of them exist, but a token
/// runs only its top-k experts. A parameter belongs to the experts of `top_k(x, dim, k)` when
/// it has `dim` and every product reading it keeps `dim` as a batch dim (each expert's slice
/// meets only its own tokens); the router, which every token reads whole, does not.
struct ParameterCounts {
  double total = 0;  ///< Elements of all parameters.
  double active = 0; ///< Those a token computes with: each expert's share scaled by k / experts.
  double expert = 0; ///< Elements of the experts' parameters.
  /// Per experts dim routed by top_k: the dim, its size and k.
  struct Routing {
    std::string dim;
    int64_t experts = 0, k = 0;
  };
  std::vector<Routing> routings;
};
ParameterCounts countParameters(const Program &program);

} // namespace tessel

#endif // TESSEL_FRONTEND_PROGRAM_H
