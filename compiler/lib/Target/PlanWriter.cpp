//===- PlanWriter.cpp - From the plan dialect to a plan file --------------===//

#include "tessel/Target/PlanWriter.h"
#include "tessel/Analysis/StepTime.h"

#include "tessel/Analysis/PlanLiveness.h"
#include "tessel/Dialect/Plan/IR/PlanDialect.h"
#include "tessel/Dialect/Settings/IR/SettingsDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace tessel;
namespace pf = tessel::planfile;

std::string tessel::formatSourceLocation(Location loc) {
  return TypeSwitch<Location, std::string>(loc)
      .Case([](FileLineColLoc l) {
        return (l.getFilename().str() + ":" + std::to_string(l.getLine()) + ":" +
                std::to_string(l.getColumn()));
      })
      .Case([](CallSiteLoc l) {
        std::string callee = formatSourceLocation(l.getCallee());
        std::string caller = formatSourceLocation(l.getCaller());
        return caller.empty() ? callee : callee + " (called from " + caller + ")";
      })
      .Case([](NameLoc l) { return formatSourceLocation(l.getChildLoc()); })
      .Case([](FusedLoc l) {
        return l.getLocations().empty() ? std::string() : formatSourceLocation(l.getLocations()[0]);
      })
      .Default([](Location) { return std::string(); });
}

namespace {

/// One section of the plan's configuration: `train.optimizer.lr`, `dims.embed`, ... Each
/// section lists its names in sorted order.
class ConfigSection {
public:
  ConfigSection(std::vector<pf::Attr> &out, std::string prefix)
      : out_(out), prefix_(std::move(prefix)), begin_(out.size()) {}
  ~ConfigSection() {
    std::stable_sort(out_.begin() + begin_, out_.end(),
                     [](const pf::Attr &a, const pf::Attr &b) { return a.name < b.name; });
  }
  void add(StringRef name, int64_t value) { out_.push_back({prefix_ + name.str(), value}); }
  void add(StringRef name, const APFloat &value) {
    out_.push_back({prefix_ + name.str(), value.convertToDouble()});
  }
  void add(StringRef name, StringRef value) { out_.push_back({prefix_ + name.str(), value.str()}); }

private:
  std::vector<pf::Attr> &out_;
  std::string prefix_;
  size_t begin_;
};

void describeDims(DictionaryAttr dims, std::vector<pf::Attr> &out) {
  ConfigSection section(out, "dims.");
  for (NamedAttribute dim : dims)
    section.add(dim.getName(), cast<IntegerAttr>(dim.getValue()).getInt());
}

void describeTrain(settings::TrainAttr train, std::vector<pf::Attr> &out) {
  ConfigSection section(out, "train.");
  settings::OptimizerAttr opt = train.getOptimizer();
  settings::LearningRateAttr lr = train.getLrSchedule();
  section.add("batch", train.getBatch());
  section.add("micro_batch", train.getMicroBatch());
  section.add("accumulation", train.getAccumulation());
  section.add("steps", train.getSteps());
  section.add("optimizer.kind", settings::stringifyOptimizerKind(opt.getKind()));
  section.add("optimizer.lr", opt.getLr());
  section.add("optimizer.beta1", opt.getBeta1());
  section.add("optimizer.beta2", opt.getBeta2());
  section.add("optimizer.eps", opt.getEps());
  section.add("optimizer.weight_decay", opt.getWeightDecay());
  section.add("optimizer.decay", opt.getDecay());
  section.add("optimizer.momentum", opt.getMomentum());
  section.add("lr_schedule.kind", settings::stringifyLrSchedule(lr.getKind()));
  section.add("lr_schedule.warmup", lr.getWarmup());
  section.add("lr_schedule.min_lr", lr.getMinLr());
  section.add("clip", train.getClip());
  section.add("precision", train.getPrecision());
  section.add("data", train.getData());
  section.add("tokenizer", train.getTokenizer());
  section.add("seed", train.getSeed());
  section.add("eval_every", train.getEvalEvery());
  section.add("eval_batches", train.getEvalBatches());
  section.add("eval_fraction", train.getEvalFraction());
  section.add("eval_data", train.getEvalData());
  section.add("checkpoint_every", train.getCheckpointEvery());
  section.add("checkpoint_dir", train.getCheckpointDir());
  section.add("log_every", train.getLogEvery());
  section.add("init_from", train.getInitFrom());
}

void describePipeline(settings::PipelineAttr pipeline, std::vector<pf::Attr> &out) {
  ConfigSection section(out, "pipeline.");
  section.add("schedule", tessel::pipeline::scheduleKindName(pipeline.getSchedule()));
  section.add("stages", pipeline.getStages());
  section.add("microbatches", pipeline.getMicrobatches());
  section.add("virtual", pipeline.getVirtualStages());
  section.add("bubble", pipeline.getBubble());
  section.add("in_flight", pipeline.getInFlight());
  if (std::optional<APFloat> formula = pipeline.getBubbleFormula())
    section.add("bubble_formula", *formula);
}

/// The module's mesh (`plan.mesh`: axes outermost first, ranks numbered row-major over them)
/// and communicator groups (`plan.group`); a module without a mesh runs on one rank.
void describeMesh(ModuleOp module, pf::Plan &plan) {
  plan.worldSize = 1;
  if (plan::MeshOp mesh = plan::meshOf(module))
    for (auto [axis, size] : llvm::zip(mesh.getAxes().getAsValueRange<StringAttr>(),
                                       mesh.getSizes())) {
      plan.mesh.push_back({axis.str(), static_cast<uint32_t>(size)});
      plan.worldSize *= static_cast<uint32_t>(size);
    }
  for (auto group : module.getOps<plan::GroupOp>()) {
    pf::Group g;
    g.name = group.getSymName().str();
    for (int64_t axis : group.getAxes())
      g.axes.push_back(static_cast<uint32_t>(axis));
    plan.groups.push_back(std::move(g));
  }
  if (plan.groups.empty())
    plan.groups.push_back({"world", {}});
}

} // namespace

FailureOr<pf::Plan> tessel::translateToPlanFile(ModuleOp module) {
  pf::Plan plan;
  plan.model = module.getSymName() ? module.getSymName()->str() : "model";
  if (auto dims = module->getAttrOfType<DictionaryAttr>(settings::kDimsName))
    describeDims(dims, plan.config);
  describeTrain(settings::trainOf(module), plan.config);
  if (settings::PipelineAttr pipeline = settings::pipelineOf(module))
    describePipeline(pipeline, plan.config);
  if (auto layers = module->getAttrOfType<IntegerAttr>(settings::kLayersName))
    plan.config.push_back({"layers", layers.getInt()});
  // What the step-time model needs of the layout beyond the programs: which recomputation ran.
  plan.config.push_back(
      {"parallel.recompute",
       settings::stringifyRecomputeMode(settings::parallelOf(module).getRecompute()).str()});
  describeMesh(module, plan);
  // Every rank of a pipeline stage runs the same programs (what differs between them, which
  // block of a split tensor each holds, follows from its place in the communicator groups at
  // run time), so the plan keeps one version per stage.
  const uint32_t stages = plan.pipelineStages();

  llvm::StringMap<uint32_t> stateIndex;
  for (auto t : module.getOps<plan::TensorOp>()) {
    pf::StateTensor s;
    s.name = t.getSymName().str();
    s.role = t.getRole().str();
    s.of = t.getOf().str();
    auto type = cast<MemRefType>(t.getType());
    auto dtype = tessel::plan::planDType(t, type);
    if (failed(dtype))
      return failure();
    s.dtype = *dtype;
    s.shape.assign(type.getShape().begin(), type.getShape().end());
    for (Attribute d : t.getDims())
      s.dims.push_back(cast<StringAttr>(d).str());
    if (auto split = t.getSplit())
      for (Attribute g : *split)
        s.split.push_back(cast<StringAttr>(g).str());
    if (auto stages = t.getStages())
      for (int64_t stage : *stages)
        s.stages.push_back(static_cast<uint32_t>(stage));
    s.init = t.getInit().str();
    s.initA = t.getInitA().convertToDouble();
    s.initB = t.getInitB().convertToDouble();
    if (auto source = t.getInitSource())
      s.initSource = source->str();
    if (auto slice = t.getInitSlice())
      s.initSlice.assign(slice->begin(), slice->end());
    stateIndex[s.name] = plan.state.size();
    plan.state.push_back(std::move(s));
  }

  for (auto program : module.getOps<plan::ProgramOp>()) {
    pf::Program p;
    p.name = program.getName().str();
    if (!program.getArenaBytes())
      return program.emitOpError("has no memory plan; run -tessel-plan-memory first");
    p.arenaBytes = *program.getArenaBytes();
    DenseMap<Value, pf::BufferRef> refs;
    auto refOf = [&](Operation *op, Value v) -> FailureOr<pf::BufferRef> {
      auto it = refs.find(v);
      if (it == refs.end())
        return op->emitOpError("uses a buffer defined outside its program");
      return it->second;
    };
    for (Operation &op : program.getBody().front()) {
      auto bufferOf = [&](Value v, pf::Storage storage, uint32_t state,
                          uint64_t offset) -> LogicalResult {
        auto type = cast<MemRefType>(v.getType());
        auto dtype = tessel::plan::planDType(&op, type);
        if (failed(dtype))
          return failure();
        refs[v] = pf::BufferRef{
            storage, state, offset,
            static_cast<uint64_t>(type.getNumElements()) * pf::dtypeBytes(*dtype), *dtype};
        return success();
      };
      LogicalResult ok =
          TypeSwitch<Operation *, LogicalResult>(&op)
              .Case([&](plan::AllocOp a) -> LogicalResult {
                if (!a.getOffset())
                  return a.emitOpError("has no offset; run -tessel-plan-memory first");
                return bufferOf(a.getResult(), pf::Storage::Arena, 0, *a.getOffset());
              })
              .Case([&](plan::InputOp in) -> LogicalResult {
                if (!in.getOffset())
                  return in.emitOpError("has no offset; run -tessel-plan-memory first");
                if (failed(bufferOf(in.getResult(), pf::Storage::Arena, 0, *in.getOffset())))
                  return failure();
                auto type = in.getResult().getType();
                pf::Port port;
                port.name = in.getName().str();
                port.dtype = refs[in.getResult()].dtype;
                port.shape.assign(type.getShape().begin(), type.getShape().end());
                port.buffer = refs[in.getResult()];
                if (auto split = in.getSplit())
                  for (Attribute g : *split)
                    port.split.push_back(cast<StringAttr>(g).str());
                p.inputs.push_back(std::move(port));
                return success();
              })
              .Case([&](plan::StateOp s) -> LogicalResult {
                auto it = stateIndex.find(s.getName());
                if (it == stateIndex.end())
                  return s.emitOpError() << "names undeclared state '" << s.getName() << "'";
                return bufferOf(s.getResult(), pf::Storage::State, it->second, 0);
              })
              .Case([&](plan::ViewOp v) -> LogicalResult {
                auto src = refOf(v, v.getSource());
                if (failed(src))
                  return failure();
                pf::BufferRef ref = *src;
                if (auto offset = v.getOffset()) {
                  // The offset counts elements of the view's element type (the source's).
                  const uint64_t width = pf::dtypeBytes(ref.dtype);
                  ref.offset += static_cast<uint64_t>(*offset) * width;
                  ref.bytes =
                      static_cast<uint64_t>(v.getResult().getType().getNumElements()) * width;
                }
                refs[v.getResult()] = ref;
                return success();
              })
              .Case([&](plan::KernelOp k) -> LogicalResult {
                pf::Instr instr;
                instr.kernel = k.getName().str();
                instr.loc = formatSourceLocation(k.getLoc());
                instr.recomputed = k->hasAttr("plan.recomputed");
                for (Value v : k.getIns()) {
                  auto r = refOf(k, v);
                  if (failed(r))
                    return failure();
                  instr.inputs.push_back(*r);
                }
                for (Value v : k.getOuts()) {
                  auto r = refOf(k, v);
                  if (failed(r))
                    return failure();
                  instr.outputs.push_back(*r);
                }
                for (NamedAttribute na : k.getParams()) {
                  auto a = tessel::plan::planParam(k, na);
                  if (failed(a))
                    return failure();
                  instr.attrs.push_back(*a);
                }
                p.instrs.push_back(std::move(instr));
                return success();
              })
              .Case([&](plan::OutputOp o) -> LogicalResult {
                auto r = refOf(o, o.getValue());
                if (failed(r))
                  return failure();
                auto type = o.getValue().getType();
                pf::Port port;
                port.name = o.getName().str();
                port.dtype = r->dtype;
                port.shape.assign(type.getShape().begin(), type.getShape().end());
                port.buffer = *r;
                p.outputs.push_back(std::move(port));
                return success();
              })
              .Default(
                  [](Operation *o) { return o->emitOpError("cannot be written to a plan file"); });
      if (failed(ok))
        return failure();
    }
    // Its memory plan, buffer by buffer, as the planner placed them.
    for (const plan::ArenaLifetime &life : plan::arenaLifetimes(program)) {
      if (life.firstKernel > life.lastKernel)
        continue; // No kernel uses it: it never holds a value.
      pf::ArenaBuffer b;
      b.offset = static_cast<uint64_t>(life.owner->getAttrOfType<IntegerAttr>("offset").getInt());
      b.bytes = static_cast<uint64_t>(life.bytes);
      b.first = static_cast<uint32_t>(life.firstKernel);
      b.last = static_cast<uint32_t>(life.lastKernel);
      b.kind = life.kind;
      p.buffers.push_back(b);
    }
    // A program of one pipeline stage, or of every stage.
    for (uint32_t stage = 0; stage < stages; ++stage) {
      if (auto s = program.getStage(); s && static_cast<uint32_t>(*s) != stage)
        continue;
      p.stage = stage;
      plan.programs.push_back(p);
    }
  }
  std::string error;
  if (!planfile::validatePlan(plan, error))
    return module.emitError("the plan is inconsistent: ") << error;
  // The runner's MFU divides these by the step time it measures (docs/planning.md).
  StepFlops flops = countStepFlops(plan);
  plan.config.push_back({"flops.model", flops.model});
  plan.config.push_back({"flops.hardware", flops.hardware});
  return plan;
}
