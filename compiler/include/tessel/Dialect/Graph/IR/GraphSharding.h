//===- GraphSharding.h - How values are laid over the mesh ------*- C++ -*-===//
//
// The vocabulary of Tessel's sharding passes. A value's sharding says, for each of its named
// dims, which mesh axis splits it (or none), and over which axes it is a partial sum still to
// be reduced. The mesh layout holds the spec's `parallel` section: axis sizes, the dim-to-axis
// rules, sequence parallelism and the ZeRO stage, and from them the sharding of every piece of
// persistent state.
//
// Each graph op states its own rule (ShardableOpInterface::inferSharding): given the
// shardings its operands have, the shardings it needs them in and those of its results. The
// partition pass inserts the collectives that turn one into the other; the ops never name a
// collective themselves, so a block written in the language is parallelised like any other.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_DIALECT_GRAPH_IR_GRAPHSHARDING_H
#define TESSEL_DIALECT_GRAPH_IR_GRAPHSHARDING_H

#include "tessel/Dialect/Settings/IR/SettingsDialect.h"
#include "tessel/Shape/NamedShape.h"

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>
#include <string>

namespace tessel::graph {

/// The mesh axes of a split: one axis ("ep"), or a group of them named as the plan names
/// communicator groups, outermost first joined by "_" ("dp_ep": the dim is split over dp × ep
/// ranks, row-major, so the dp index is the outer one).
llvm::SmallVector<llvm::StringRef, 2> axesOfSplit(llvm::StringRef split);
/// Whether `split` splits over `axis` (alone or in its group).
bool splitsOver(llvm::StringRef split, llvm::StringRef axis);

/// How one value is split: `axes[i]` is the mesh axis, or group of axes, splitting dim i (""
/// when whole), and `partial` lists (sorted) the single axes over which the ranks hold
/// addends of the value.
struct Sharding {
  llvm::SmallVector<std::string, 4> axes;
  llvm::SmallVector<std::string, 2> partial;

  static Sharding replicated(size_t rank) { return {llvm::SmallVector<std::string, 4>(rank), {}}; }
  bool operator==(const Sharding &o) const { return axes == o.axes && partial == o.partial; }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
  bool isPartial() const { return !partial.empty(); }
  /// Whether the value is partial over `axis` (over each axis of a group).
  bool isPartialOver(llvm::StringRef axis) const;
  /// Makes the value partial over `axis` (over each axis of a group).
  void addPartial(llvm::StringRef axis);
  /// Whether some dim is split over `axis`, alone or in a group.
  bool splitsOver(llvm::StringRef axis) const;
  /// The single axes splitting some dim, in dim order (a group's outermost first).
  llvm::SmallVector<std::string, 4> splitAxes() const;
  /// `[dp, *, tp] partial [dp]`.
  std::string str() const;
};

/// What a state tensor is to the optimizer; each role may be laid out differently under ZeRO.
enum class StateRole { Param, Grad, Optimizer };

/// The spec's parallel layout, and the shardings that follow from it.
class MeshLayout {
public:
  /// The layout the module's settings give (no mesh: one rank). Axes of size 1 are dropped:
  /// they split nothing.
  explicit MeshLayout(settings::ParallelAttr parallel);
  /// The layout of the module's `tessel.parallel`.
  static MeshLayout fromModule(mlir::ModuleOp module);

  /// The grid's axes of size > 1, outermost first in the order of common/mesh/MeshAxes.h.
  /// Rank numbers are row-major over them.
  llvm::ArrayRef<std::pair<std::string, int64_t>> axes() const { return axes_; }
  /// The ranks an axis, or a group of axes ("dp_ep"), has.
  int64_t size(llvm::StringRef axis) const;
  int64_t worldSize() const;
  /// The index of `axis` in axes(), or -1.
  int axisIndex(llvm::StringRef axis) const;
  /// The communicator group of the grid axes `gridAxes` (indices into axes()): their names,
  /// outermost first, joined by "_" ("dp", "tp", "dp_tp").
  std::string groupName(llvm::ArrayRef<int16_t> gridAxes) const;
  /// The axis (or group, see axesOfSplit) the spec maps dim `dim` to, or "".
  std::string ruleFor(llvm::StringRef dim) const;
  bool sequenceParallel() const { return sequenceParallel_; }
  int zeroStage() const { return zero_; }
  /// Whether attention under context parallelism passes keys and values around the cp ring
  /// (`context = ring`) rather than all-gathering them.
  bool contextRing() const { return contextRing_; }
  bool isTrivial() const { return axes_.empty(); }

  /// The rules applied to `shape`: each dim split over its axis when the axis divides it.
  Sharding byRules(const NamedShape &shape) const;
  /// The dim that ZeRO splits over dp in a tensor laid out as `s`: the outermost dim that no
  /// axis splits yet and whose local size dp divides; -1 when there is none.
  int zeroDim(const NamedShape &globalShape, const Sharding &s) const;
  /// The sharding of a parameter's state in `role`, from the rules and the ZeRO stage:
  ///   stage 0: all as the parameter; stage 1: gradients are partial over dp until the step,
  ///   moments split over dp; stage 2: gradients split too; stage 3: the parameter as well.
  Sharding stateSharding(const NamedShape &paramShape, StateRole role) const;
  /// The sharding a partial value is reduced to when nothing asks for a particular one: a
  /// reduce-scatter onto `seq` for tp partial sums under sequence parallelism and onto the dim
  /// the spec splits over cp for cp partial sums, otherwise an all-reduce.
  Sharding reducedForm(const NamedShape &globalShape, const Sharding &s) const;

private:
  llvm::SmallVector<std::pair<std::string, int64_t>, 4> axes_;
  std::map<std::string, std::string> rules_;
  bool sequenceParallel_ = false;
  int zero_ = 0;
  bool contextRing_ = false;
};

/// An op's sharding rule: the sharding each operand must have, and those of the results.
struct ShardingRule {
  llvm::SmallVector<Sharding> operands, results;
};

/// Chooses a split for each dim of an op's iteration space from its operands' splits. An
/// axis splits at most one dim; dims in `whole` stay unsplit. When two dims compete for an
/// axis, the first of these wins (operand order breaks ties):
///   1. a split the rules give a parameter along a dim the results keep, when every operand
///      holding the axis on another dim has the parameter's dim too: weights never move for
///      an activation's sake, the activations are resharded (all-to-all) instead (expert
///      weights under `experts = ep`);
///   2. a split the rules give an activation along a dim the results keep;
///   3. a split the rules give an activation along a dim the op sums over (the summed operand
///      is resharded rather than the result made a partial sum: a MoE combine moves the
///      expert outputs back to their tokens);
///   4. any other split the rules give a parameter: one that some competing operand could
///      only meet by being gathered whole (a router's `experts` against tokens split over the
///      batch), or that would make the result partial: the weight moves;
///   5. splits the rules do not give (sequence parallelism, ZeRO).
/// Each operand's requirement is the choice restricted to its dims; partial operands are
/// first reduced (MeshLayout::reducedForm). Results get the choice on their dims and are
/// partial over the axes of dims in `summed`.
class DimSolver {
public:
  DimSolver(const MeshLayout &mesh) : mesh_(mesh) {}
  /// Adds the next operand. A partial operand is reduced first unless `keepPartial` (for
  /// ops linear in it), in which case its requirement keeps the partial axes.
  void addOperand(const NamedShape &shape, const Sharding &actual, bool keepPartial = false);
  /// Adds the next operand, a parameter: its rule splits stay in place where they can.
  void addParameter(const NamedShape &shape, const Sharding &actual);
  /// The dims the op sums over (their splits rank below those of dims it keeps).
  void sumOver(llvm::ArrayRef<std::string> dims) { summed_.append(dims.begin(), dims.end()); }
  void keepWhole(llvm::StringRef dim) { whole_.push_back(dim.str()); }
  void keepWholeAll(const NamedShape &shape);
  /// Offers `dim` the axis the rules give it, as if an operand had it split so: for a result
  /// dim no operand has, such as the rows of a gradient table.
  void prefer(llvm::StringRef dim, int64_t size);
  /// Ties `follower` to `leader`: when `leader` is split, `follower` is split the same way
  /// (grouped-query attention's key heads follow its query heads). When the leader's axis
  /// does not divide the follower, the leader stays whole too, unless `followerMayStayWhole`:
  /// then the follower alone stays whole (every rank holds all of it).
  void tie(llvm::StringRef leader, llvm::StringRef follower, bool followerMayStayWhole = false) {
    ties_.push_back({leader.str(), follower.str(), followerMayStayWhole});
  }
  /// Fills `rule.operands` (one per addOperand, in order).
  void solve(ShardingRule &rule);
  /// The sharding of a result of shape `shape`, partial over the axes of the dims in `summed`.
  Sharding result(const NamedShape &shape, llvm::ArrayRef<std::string> summed = {}) const;
  std::string axisOf(llvm::StringRef dim) const;

private:
  const MeshLayout &mesh_;
  /// Whether a split candidate (operand `k`'s split of its dim `i`) is a parameter's that
  /// every operand holding the same axis on another dim could be resharded to.
  bool holdsInPlace(size_t k, size_t i) const;

  llvm::SmallVector<std::pair<NamedShape, Sharding>> operands_;
  llvm::SmallVector<llvm::SmallVector<std::string, 2>> keptPartial_;
  llvm::SmallVector<bool> parameter_;
  llvm::SmallVector<std::string> summed_;
  llvm::SmallVector<std::string> whole_;
  struct Tie {
    std::string leader, follower;
    bool followerMayStayWhole;
  };
  llvm::SmallVector<Tie> ties_;
  llvm::SmallVector<NamedDim> preferred_;
  std::map<std::string, std::string> chosen_; ///< dim -> axis
};

/// What an op's partition hook may ask of the partition pass.
class Partitioner {
public:
  virtual ~Partitioner() = default;
  virtual mlir::OpBuilder &builder() = 0;
  virtual const MeshLayout &mesh() const = 0;
  /// Emits the collectives that bring `value` (the local part of a value of type
  /// `globalType`, laid out as `from`) to `to`. Null (after a diagnostic) when no collective
  /// can: a value cannot become a partial sum.
  virtual mlir::Value convert(mlir::Value value, mlir::Type globalType, const Sharding &from,
                              const Sharding &to) = 0;
  /// The initialiser of parameter `name`, for ops that read a parameter the function did not.
  virtual mlir::Attribute paramInit(llvm::StringRef name) const = 0;
  /// Values a rule's partition computed that a later op of the same function may reuse, by a
  /// key the rule makes (the vocabulary-parallel loss keeps its row statistics for its
  /// gradient this way).
  virtual std::map<std::string, mlir::Value> &memo() = 0;
  /// The per-rank type of a value of global type `type` laid out as `s`.
  virtual mlir::Type localType(mlir::Type type, const Sharding &s) const = 0;
};

/// The default partition of an op: the same op on local operands, with local result types.
mlir::LogicalResult partitionByCloning(mlir::Operation *op, Partitioner &p,
                                       llvm::ArrayRef<mlir::Value> operands,
                                       const ShardingRule &rule,
                                       llvm::SmallVectorImpl<mlir::Value> &results);

/// The symbol of the `shard.grid` the partition pass creates and its collectives name.
constexpr llvm::StringLiteral kGridName = "mesh";

/// The attribute name under which passes record the shardings of an op's results (and of a
/// function's arguments).
constexpr llvm::StringLiteral kShardingAttr = "graph.sharding";

/// The sharding recorded for `v` (a function argument or an op result), if any.
std::optional<Sharding> recordedSharding(mlir::Value v);

} // namespace tessel::graph

#endif // TESSEL_DIALECT_GRAPH_IR_GRAPHSHARDING_H
