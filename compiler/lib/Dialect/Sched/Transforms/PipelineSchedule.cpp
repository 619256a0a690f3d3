//===- PipelineSchedule.cpp - Stages and the pipeline schedule ------------===//
//
// With a pipeline axis in the mesh, splits the repeated layers into stages (the spec's
// stage_map, or a balanced split by a cost model) and writes the schedule the spec names as a
// `sched.pipeline`. The bubble and the peak number of micro-batches in flight are read off its
// action lists (common/schedule/Schedule.h) and recorded for `tessel estimate`.
//
//===----------------------------------------------------------------------===//

#include "tessel/Dialect/Sched/Transforms/Passes.h"

#include "common/schedule/Schedule.h"
#include "tessel/Dialect/Graph/IR/GraphOps.h"
#include "tessel/Dialect/Sched/IR/SchedDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace tessel {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "tessel/Dialect/Sched/Transforms/Passes.h.inc"
} // namespace tessel

using namespace mlir;
using namespace tessel;
namespace pl = tessel::pipeline;

namespace {

/// The cost of an op in the cost model: multiply-adds of a contraction (the product of the
/// sizes of every dim it touches), elements of anything else.
double costOf(Operation *op) {
  double elements = 0;
  if (isa<graph::ContractOp>(op)) {
    std::map<std::string, int64_t> dims;
    for (Value v : op->getOperands()) {
      NamedShape shape = graph::getNamedShape(v.getType()).value_or(NamedShape());
      for (const NamedDim &d : shape)
        dims[d.name] = d.size;
    }
    double n = 1;
    for (const auto &[name, size] : dims)
      n *= static_cast<double>(size);
    return n;
  }
  for (Value r : op->getResults())
    if (auto t = dyn_cast<RankedTensorType>(r.getType()))
      elements += static_cast<double>(t.getNumElements());
  return elements;
}

/// Splits `layers` (costs in order) into `chunks` contiguous non-empty runs minimising the
/// largest run's cost, with `first` added to the first run and `last` to the last: the
/// embedding and the loss count, so the end stages may get fewer layers. Returns the first
/// layer of each run.
std::vector<int64_t> balancedSplit(const std::vector<double> &layers, int64_t chunks, double first,
                                   double last) {
  int64_t n = static_cast<int64_t>(layers.size());
  std::vector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + layers[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[c][i]: the least largest cost of splitting layers [0, i) into c runs.
  std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> from(chunks + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t c = 1; c <= chunks; ++c)
    for (int64_t i = c; i <= n; ++i)
      for (int64_t j = c - 1; j < i; ++j) {
        double run = prefix[i] - prefix[j] + (c == 1 ? first : 0) + (c == chunks ? last : 0);
        double cost = std::max(best[c - 1][j], run);
        if (cost < best[c][i]) {
          best[c][i] = cost;
          from[c][i] = j;
        }
      }
  std::vector<int64_t> starts(chunks);
  for (int64_t c = chunks, i = n; c >= 1; --c) {
    starts[c - 1] = from[c][i];
    i = from[c][i];
  }
  return starts;
}

struct PipelineSchedule : tessel::impl::PipelineScheduleBase<PipelineSchedule> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    settings::ParallelAttr parallel = settings::parallelOf(module);
    int64_t p = parallel.axisSize("pp");
    if (p <= 1)
      return;
    pl::ScheduleKind kind = parallel.getSchedule();
    int64_t m = parallel.getMicrobatches();
    int64_t v = parallel.getVirtualStages();
    int64_t layers = settings::layerCount(module);
    int64_t chunks = p * v;
    if (layers < chunks) {
      module.emitError() << layers << " layers cannot fill " << chunks << " pipeline stages";
      return signalPassFailure();
    }

    // The cost of each layer, and of what comes before and after the repeated layers.
    std::vector<double> layerCost(layers, 0.0);
    double before = 0, after = 0;
    if (auto forward = module.lookupSymbol<func::FuncOp>("forward")) {
      bool seenLayer = false;
      for (Operation &op : forward.getBody().front().without_terminator()) {
        auto layer = op.getAttrOfType<IntegerAttr>("graph.layer");
        if (layer && layer.getInt() >= 0 && layer.getInt() < layers) {
          layerCost[layer.getInt()] += costOf(&op);
          seenLayer = true;
        } else {
          (seenLayer ? after : before) += costOf(&op);
        }
      }
    }

    // The first layer of each virtual stage.
    std::vector<int64_t> starts;
    if (ArrayAttr map = parallel.getStageMap(); !map.empty()) {
      for (Attribute stage : map) {
        auto list = cast<ArrayAttr>(stage);
        starts.push_back(list.empty() ? 0 : cast<IntegerAttr>(list[0]).getInt());
      }
    } else if (v > 1) {
      for (int64_t c = 0; c < chunks; ++c) // interleaving needs equal chunks
        starts.push_back(c * (layers / chunks));
    } else {
      starts = balancedSplit(layerCost, chunks, before, after);
    }
    SmallVector<int64_t> layerRuns;
    for (size_t c = 0; c < starts.size(); ++c) {
      int64_t end = c + 1 < starts.size() ? starts[c + 1] : layers;
      layerRuns.push_back(starts[c]);
      layerRuns.push_back(end - starts[c]);
    }

    const char *kindName = pl::scheduleKindName(kind);
    std::string error;
    auto lists = pl::buildSchedule(kind, static_cast<int>(p), static_cast<int>(m),
                                   static_cast<int>(v), error);
    if (!error.empty() || !pl::checkSchedule(kind, static_cast<int>(p), static_cast<int>(m),
                                             static_cast<int>(v), lists, error)) {
      module.emitError() << "the " << kindName << " schedule: " << error;
      return signalPassFailure();
    }
    pl::Timeline timeline = pl::simulate(kind, static_cast<int>(p), static_cast<int>(m),
                                         static_cast<int>(v), lists, pl::Costs());

    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    Location loc = module.getLoc();
    SmallVector<int64_t> inFlight(timeline.peakInFlight.begin(), timeline.peakInFlight.end());
    sched::PipelineOp::create(b, loc, b.getStringAttr(kindName), b.getI64IntegerAttr(p),
                              b.getI64IntegerAttr(m), b.getI64IntegerAttr(v),
                              b.getDenseI64ArrayAttr(layerRuns),
                              b.getF64FloatAttr(timeline.bubbleOverIdeal),
                              b.getDenseI64ArrayAttr(inFlight));

    // What `tessel estimate` reports, through the plan's configuration.
    double analytic =
        pl::analyticBubble(kind, static_cast<int>(p), static_cast<int>(m), static_cast<int>(v));
    std::optional<APFloat> formula;
    if (analytic == analytic) // not NaN: the schedule has a closed form
      formula = APFloat(analytic);
    module->setAttr(settings::kPipelineName,
                    settings::PipelineAttr::get(module.getContext(), kind, p, m, v,
                                                APFloat(timeline.bubbleOverIdeal),
                                                *llvm::max_element(inFlight), formula));
  }
};

} // namespace
