//===- SemaParallel.cpp - The parallel section and the layout checks ------===//
//
// readParallel reads the `parallel` section into the program's ParallelConfig: the mesh, the
// dims each axis shards, and the settings of ZeRO, recomputation, context parallelism and the
// pipeline. It checks only what the section says by itself; whether the layout fits the model
// (dims divisible by their shards, enough layers for the stages, an axis that shards nothing)
// needs the elaborated graph, so checkParallelAgainstModel runs after elaboration.
//
//===----------------------------------------------------------------------===//

#include "SemaConfig.h"

#include "common/mesh/MeshAxes.h"
#include "common/schedule/ScheduleKind.h"

#include <algorithm>

using namespace tessel;
using namespace tessel::detail;

namespace {

/// The mesh's axes (common/mesh/MeshAxes.h).
const std::vector<std::string> kAxes(mesh::kMeshAxes.begin(), mesh::kMeshAxes.end());
/// The schedules' spellings (common/schedule/ScheduleKind.h), and the one other name a spec
/// may use: GPipe's for all-forward-all-backward.
std::vector<std::string> scheduleWords() {
  std::vector<std::string> words;
  for (pipeline::ScheduleKind kind : pipeline::kScheduleKinds)
    words.push_back(pipeline::scheduleKindName(kind));
  return words;
}
const std::map<std::string, std::string> kScheduleAliases = {
    {"gpipe", pipeline::scheduleKindName(pipeline::ScheduleKind::AFAB)}};

} // namespace

int64_t ParallelConfig::axisSize(const std::string &axis) const {
  for (const MeshAxis &a : mesh)
    if (a.name == axis)
      return a.size;
  return 1;
}

int64_t ParallelConfig::worldSize() const {
  int64_t n = 1;
  for (const MeshAxis &a : mesh)
    n *= a.size;
  return n;
}

void Sema::readParallel(const ast::Section &section) {
  ParallelConfig &cfg = program_.parallel;
  SettingGroup top(*this, section.settings, "parallel",
                   {"mesh", "shard", "sequence_parallel", "zero", "pipeline", "recompute", "bucket",
                    "overlap", "context"});
  auto readBool = [&](const ast::Expr *e, Located<bool> &out, const char *what) {
    if (!e)
      return;
    Value v = evalConstant(*e);
    if (v.isError())
      return;
    if (v.kind != Value::Bool) {
      error(e->loc, std::string(what) + " is true or false, not " + kindName(v.kind));
      return;
    }
    out = {v.b, e->loc};
  };

  if (const auto *mesh = top.group("mesh")) {
    SettingGroup axes(*this, *mesh, "mesh", kAxes);
    for (const ast::Setting &s : *mesh) {
      if (std::find(kAxes.begin(), kAxes.end(), s.key.name) == kAxes.end() ||
          axes.get(s.key.name) != &s)
        continue; // Reported by SettingGroup.
      const ast::Expr *e = axes.value(s.key.name);
      if (!e)
        continue;
      if (auto n = evalInt(*e, ("mesh axis '" + s.key.name + "'").c_str(), 1))
        cfg.mesh.push_back({s.key.name, *n, s.key.loc});
    }
  }

  if (const auto *shard = top.group("shard")) {
    std::map<std::string, SourceLoc> seen;
    for (const ast::Setting &s : *shard) {
      if (s.isGroup()) {
        error(s.key.loc, "write a mapping as dim = axis, e.g. heads = tp");
        continue;
      }
      auto [it, inserted] = seen.insert({s.key.name, s.key.loc});
      if (!inserted) {
        if (error(s.key.loc, "dim '" + s.key.name + "' is mapped twice",
                  "map a dim to several axes at once with a tuple: batch = (dp, cp)"))
          note(it->second, "first mapped here");
        continue;
      }
      DimSharding ds{s.key.name, {}, s.key.loc};
      std::vector<const ast::Expr *> axisExprs;
      if (s.value->kind == ast::ExprKind::Tuple || s.value->kind == ast::ExprKind::List)
        for (const auto &e : s.value->operands)
          axisExprs.push_back(e.get());
      else
        axisExprs.push_back(s.value.get());
      for (const ast::Expr *e : axisExprs) {
        if (e->kind != ast::ExprKind::Name) {
          error(e->loc, "expected a mesh axis name (" + mesh::meshAxisList() + ")");
          continue;
        }
        bool inMesh = false;
        for (const MeshAxis &a : cfg.mesh)
          inMesh |= a.name == e->text;
        if (!inMesh) {
          std::vector<std::string> names;
          for (const MeshAxis &a : cfg.mesh)
            names.push_back(a.name);
          // An axis the mesh leaves out is missing, not misspelt: suggesting 'tp' for 'dp'
          // would mislead.
          bool knownAxis = std::find(kAxes.begin(), kAxes.end(), e->text) != kAxes.end();
          std::string guess = knownAxis ? "" : closestMatch(e->text, names);
          std::string list;
          for (const std::string &n : names)
            list += (list.empty() ? "" : ", ") + n;
          std::string declared = list.empty() ? std::string("the mesh declares no axes")
                                              : "the mesh declares " + list;
          error(e->loc, "unknown mesh axis '" + e->text + "'",
                knownAxis ? declared + "; add " + e->text + " to mesh { ... }"
                : guess.empty() ? declared
                                : "did you mean '" + guess + "'?");
          continue;
        }
        if (e->text == "pp") {
          error(e->loc, "dims cannot be sharded over 'pp'",
                "pipeline stages split the layers, not a dim");
          continue;
        }
        if (std::find(ds.axes.begin(), ds.axes.end(), e->text) != ds.axes.end()) {
          error(e->loc, "axis '" + e->text + "' is listed twice for dim '" + s.key.name + "'");
          continue;
        }
        ds.axes.push_back(e->text);
      }
      // A dim split over several axes is split over their group, row-major, outermost first;
      // the passes support that for the data axes, whose ranks all hold whole samples.
      bool dataAxes = std::all_of(ds.axes.begin(), ds.axes.end(),
                                  [](const std::string &a) { return a == "dp" || a == "ep"; });
      if (ds.axes.size() > 1 && !dataAxes) {
        error(s.value->loc, "only the data axes dp and ep can split one dim together",
              "split the batch over both: batch = (dp, ep)");
        ds.axes.resize(1); // Still a use of the first axis: no second error that it is unused.
      }
      if (!ds.axes.empty())
        cfg.shard.push_back(std::move(ds));
    }
  }

  readBool(top.value("sequence_parallel"), cfg.sequenceParallel, "sequence_parallel");
  readBool(top.value("overlap"), cfg.overlap, "overlap");
  if (const ast::Expr *e = top.value("zero")) {
    Value v = evalConstant(*e);
    if (v.kind == Value::Int && v.i >= 0 && v.i <= 3)
      cfg.zero = {v.i, e->loc};
    else if (!v.isError())
      error(e->loc, "zero is a ZeRO stage: 0, 1, 2 or 3",
            "1 shards optimizer state, 2 also gradients, 3 also parameters");
  }
  if (const ast::Expr *e = top.value("recompute"))
    if (auto w = readWord(*this, *e, "recompute mode", {"none", "selective", "full"}))
      cfg.recompute = {*w, e->loc};
  if (const ast::Expr *e = top.value("context"))
    if (auto w = readWord(*this, *e, "context parallel attention", {"allgather", "ring"}))
      cfg.context = {*w, e->loc};
  if (const ast::Expr *e = top.value("bucket"))
    if (auto n = evalInt(*e, "bucket", 1))
      cfg.bucketBytes = {*n, e->loc};

  if (const auto *pipe = top.group("pipeline")) {
    cfg.pipelineLoc = top.get("pipeline")->key.loc;
    SettingGroup p(*this, *pipe, "pipeline", {"schedule", "microbatches", "virtual", "stage_map"});
    if (const ast::Expr *e = p.value("schedule"))
      if (auto w = readWord(*this, *e, "pipeline schedule", scheduleWords(),
                                kScheduleAliases))
        cfg.schedule = {*w, e->loc};
    if (const ast::Expr *e = p.value("microbatches"))
      if (auto n = evalInt(*e, "microbatches", 1))
        cfg.microbatches = {*n, e->loc};
    if (const ast::Expr *e = p.value("virtual"))
      if (auto n = evalInt(*e, "virtual", 1))
        cfg.virtualStages = {*n, e->loc};
    if (const ast::Expr *e = p.value("stage_map")) {
      Value v = evalConstant(*e);
      bool ok = v.kind == Value::List;
      std::vector<std::vector<int64_t>> map;
      for (const Value &stage : v.elems) {
        ok &= stage.kind == Value::List;
        std::vector<int64_t> layers;
        for (const Value &l : stage.elems) {
          ok &= l.kind == Value::Int;
          layers.push_back(l.i);
        }
        map.push_back(layers);
      }
      if (!v.isError() && !ok)
        error(e->loc, "stage_map lists the layers of each stage: [[0, 1], [2, 3]]");
      else if (ok)
        cfg.stageMap = {map, e->loc};
    }
  }
}

void Sema::checkLayerChain(int64_t pp) {
  // Pipeline stages run the layers in turn, each passing its result to the next, and the
  // last stage computes the loss: a layer that ignores the one before it, or a loss that
  // ignores the last layer, leaves a stage with nothing to pass on.
  const Graph &g = program_.forward;
  int inputs = static_cast<int>(g.inputs.size());
  auto layerOf = [&](int value) { return value < inputs ? -1 : g.ops[value - inputs].layer; };
  int64_t last = program_.layers - 1;
  std::vector<bool> readsPrevious(program_.layers, false);
  for (const Op &op : g.ops)
    for (int operand : op.operands)
      if (op.layer > 0 && layerOf(operand) == op.layer - 1)
        readsPrevious[op.layer] = true;
  std::string mesh = "pp = " + std::to_string(pp) + " runs the layers on the pipeline stages in "
                     "turn, each passing its result to the next";
  for (int64_t l = 1; l <= last; ++l)
    if (!readsPrevious[l]) {
      error(program_.layersLoc,
            mesh + ", but layer " + std::to_string(l) + " does not read what layer " +
                std::to_string(l - 1) + " computes",
            "write the layer stack as repeat layers { x = block(x) }");
      return;
    }
  // Whether the loss depends on the last layer: a walk back from it.
  std::vector<bool> seen(inputs + g.ops.size(), false);
  std::vector<int> work = {g.result};
  while (!work.empty()) {
    int v = work.back();
    work.pop_back();
    if (v < inputs || seen[v])
      continue;
    seen[v] = true;
    if (layerOf(v) == last)
      return;
    for (int operand : g.ops[v - inputs].operands)
      work.push_back(operand);
  }
  error(program_.layersLoc, mesh + ", but the loss does not depend on the last layer",
        "compute the loss from what the repeat computes");
}

void Sema::checkParallelAgainstModel() {
  ParallelConfig &cfg = program_.parallel;
  const TrainConfig &train = program_.train;
  int64_t tp = cfg.axisSize("tp"), cp = cfg.axisSize("cp"), pp = cfg.axisSize("pp");
  int64_t dp = cfg.axisSize("dp");

  if (options_.ranks > 0 && cfg.worldSize() != options_.ranks)
    error(cfg.mesh.empty() ? model_->name.loc : cfg.mesh.front().loc,
          "the mesh has " + std::to_string(cfg.worldSize()) +
              (cfg.worldSize() == 1 ? " rank but " : " ranks but ") +
              std::to_string(options_.ranks) +
              (options_.ranks == 1 ? " was requested" : " were requested"),
          "the product of the mesh axes is the number of ranks");

  // A data-parallel mesh shards the batch unless told otherwise; so does an expert-parallel
  // one, whose ranks take different tokens too.
  int64_t ep = cfg.axisSize("ep");
  bool batchMapped = false;
  for (const DimSharding &ds : cfg.shard)
    batchMapped |= ds.dim == "batch";
  if ((dp > 1 || ep > 1) && !batchMapped) {
    DimSharding batch{"batch", {}, {}};
    if (dp > 1)
      batch.axes.push_back("dp");
    if (ep > 1)
      batch.axes.push_back("ep");
    cfg.shard.push_back(batch);
  }
  if (ep > 1)
    checkExpertParallel();

  std::set<std::string> usedAxes;
  for (const DimSharding &ds : cfg.shard) {
    // An axis named in shard is used, even when the dim has an error of its own: reporting
    // the axis as unused as well would be a second, misleading error.
    usedAxes.insert(ds.axes.begin(), ds.axes.end());
    auto it = dims_.find(ds.dim);
    if (it == dims_.end()) {
      // A dim whose own definition is erroneous was reported there, once.
      if (ds.dim == "batch" || !ds.loc.isValid() || dimDefinitions_.count(ds.dim))
        continue;
      if (definitions_.count(ds.dim)) {
        error(ds.loc, "'" + ds.dim + "' is a constant, not a dim; only dims can be sharded");
        continue;
      }
      std::string guess = wantHints() ? closestMatch(ds.dim, knownNames()) : "";
      error(ds.loc, "unknown dim '" + ds.dim + "' in shard",
            guess.empty() ? "" : "did you mean '" + guess + "'?");
      continue;
    }
    int64_t ways = 1;
    for (const std::string &a : ds.axes)
      ways *= cfg.axisSize(a);
    int64_t size = it->second.size;
    if (ds.dim == "batch")
      size = train.microBatch.value * cfg.dataWays(); // The global micro-batch.
    int64_t cp = std::count(ds.axes.begin(), ds.axes.end(), "cp") ? cfg.axisSize("cp") : 1;
    if (size % ways != 0)
      error(ds.loc, "dim '" + ds.dim + "' (" + std::to_string(size) +
                        ") is not divisible by its " + std::to_string(ways) + " shards",
            "each shard must hold a whole number of elements; change the dim or the axis size");
    else if (cp > 1 && size % (2 * ways) != 0)
      error(ds.loc,
            "dim '" + ds.dim + "' (" + std::to_string(size) + ") does not split into the " +
                std::to_string(2 * ways) +
                " chunks context parallelism over cp = " + std::to_string(cp) + " needs",
            "each cp rank holds one chunk from the head of the sequence and one from its tail "
            "(so that causal attention costs every rank the same): 2 x cp must divide it");
  }
  for (const MeshAxis &a : cfg.mesh)
    if (a.size > 1 && (a.name == "tp" || a.name == "cp" || a.name == "dp") && !usedAxes.count(a.name))
      error(a.loc,
            "mesh axis '" + a.name + "' has " + std::to_string(a.size) +
                " ranks but no dim is sharded over it",
            a.name == "tp"   ? "map the dims to split, e.g. shard { heads = tp, ffn = tp }"
            : a.name == "cp" ? "context parallelism splits the sequence: shard { seq = cp }"
            : ep > 1         ? "shard the batch over both data axes: shard { batch = (dp, ep) }"
                             : "shard the batch: shard { batch = dp }");

  auto seq = dims_.find("seq");
  if (cfg.sequenceParallel.value) {
    if (tp == 1)
      error(cfg.sequenceParallel.loc, "sequence_parallel needs a tp axis larger than 1");
    else if (seq == dims_.end())
      error(cfg.sequenceParallel.loc, "sequence_parallel splits the dim 'seq', which this model lacks");
    else if (seq->second.size % (tp * cp) != 0)
      error(cfg.sequenceParallel.loc,
            "seq (" + std::to_string(seq->second.size) + ") is not divisible by tp x cp (" +
                std::to_string(tp * cp) + ") under sequence parallelism");
  }

  // Pipeline parallelism.
  int64_t v = cfg.virtualStages.value;
  if (v > 1 && cfg.schedule.value != "interleaved")
    error(cfg.virtualStages.loc, "virtual stages need schedule = interleaved");
  if (cfg.schedule.value == "interleaved" && v < 2 && pp > 1)
    error(cfg.schedule.loc, "the interleaved schedule needs virtual >= 2");
  int64_t m = cfg.microbatches.value ? cfg.microbatches.value : train.accumulation;
  if (cfg.microbatches.value && train.microBatch.value > 0 &&
      cfg.microbatches.value != train.accumulation)
    error(cfg.microbatches.loc,
          "microbatches " + std::to_string(cfg.microbatches.value) +
              " disagrees with batch / (micro_batch x dp) = " + std::to_string(train.accumulation),
          "micro-batches are the gradient accumulation steps; set batch and micro_batch to match");
  if (pp > 1) {
    SourceLoc ppLoc;
    for (const MeshAxis &a : cfg.mesh)
      if (a.name == "pp")
        ppLoc = a.loc;
    if (program_.layers == 0) {
      error(ppLoc, "pipeline parallelism splits the repeated layers, but forward has no 'repeat'");
    } else {
      int64_t stages = pp * v;
      // Said in the user's terms: with virtual stages, the count is a product of two settings.
      std::string asked = v > 1 ? "pp = " + std::to_string(pp) + " x virtual = " +
                                      std::to_string(v) + " = " + std::to_string(stages) +
                                      " model chunks need"
                                : "pp = " + std::to_string(pp) + " pipeline stages need";
      if (program_.layers < stages) {
        if (error(ppLoc,
                  asked + " at least " + std::to_string(stages) + " layers, one per " +
                      (v > 1 ? "chunk" : "stage") + ", but the model has " +
                      std::to_string(program_.layers),
                  v > 1 ? "lower pp or virtual, or repeat more layers"
                        : "lower pp, or repeat more layers") &&
            v > 1)
          note(cfg.virtualStages.loc, "virtual = " + std::to_string(v) + " is set here");
      } else if (v > 1 && program_.layers % stages != 0) {
        error(cfg.virtualStages.loc,
              "virtual = " + std::to_string(v) + ": " + std::to_string(program_.layers) +
                  " layers do not split evenly over pp x virtual = " + std::to_string(stages) +
                  " stages");
      }
    }
    if (program_.layers > 1 && program_.forward.result >= 0)
      checkLayerChain(pp);
    pipeline::ScheduleKind kind;
    if (pipeline::parseScheduleKind(cfg.schedule.value, kind) &&
        pipeline::needsMicrobatchPerStage(kind) && m < pp)
      error(cfg.schedule.loc.isValid() ? cfg.schedule.loc : ppLoc,
            "schedule " + cfg.schedule.value + " needs at least as many micro-batches as stages (" +
                std::to_string(m) + " < " + std::to_string(pp) + ")",
            "raise batch / micro_batch, or use schedule = afab");
  }
  if (!cfg.stageMap.value.empty()) {
    const auto &map = cfg.stageMap.value;
    int64_t stages = pp * v;
    if (static_cast<int64_t>(map.size()) != stages)
      error(cfg.stageMap.loc, "stage_map lists " + std::to_string(map.size()) + " stage" +
                                  (map.size() == 1 ? "" : "s") + " but pp x virtual is " +
                                  std::to_string(stages));
    std::vector<int> seen(std::max<int64_t>(program_.layers, 0), 0);
    for (const auto &stage : map) {
      if (stage.empty())
        error(cfg.stageMap.loc, "stage_map has a stage with no layers");
      for (int64_t l : stage) {
        if (l < 0 || l >= program_.layers) {
          error(cfg.stageMap.loc, "stage_map names layer " + std::to_string(l) + " of " +
                                      std::to_string(program_.layers));
          continue;
        }
        if (++seen[l] == 2)
          error(cfg.stageMap.loc, "stage_map assigns layer " + std::to_string(l) + " twice");
      }
    }
    for (size_t l = 0; l < seen.size(); ++l)
      if (!seen[l]) {
        error(cfg.stageMap.loc, "stage_map skips layer " + std::to_string(l));
        break;
      }
  }
  // Settings that say how to use an axis the mesh does not have change nothing.
  if (cfg.zero.value > 0 && dp == 1 && cfg.zero.loc.isValid())
    diags_.warning(cfg.zero.loc, "zero = " + std::to_string(cfg.zero.value) +
                                     " has no effect without a dp axis larger than 1");
  if (cfg.context.value == "ring" && cp == 1 && cfg.context.loc.isValid())
    diags_.warning(cfg.context.loc, "context = ring has no effect without a cp axis larger than 1",
                   "context parallelism splits the sequence: mesh { cp = 2 } and shard { seq = cp }");
  if (pp == 1 && cfg.pipelineLoc.isValid())
    diags_.warning(cfg.pipelineLoc,
                   "the pipeline settings have no effect without a pp axis larger than 1",
                   "pipeline parallelism splits the layers into stages: mesh { pp = 2 }");
}

void Sema::checkExpertParallel() {
  const ParallelConfig &cfg = program_.parallel;
  SourceLoc epLoc;
  for (const MeshAxis &a : cfg.mesh)
    if (a.name == "ep")
      epLoc = a.loc;
  std::string ranks = std::to_string(cfg.axisSize("ep"));
  // ep is a data axis for everything but the expert weights: the tokens must split over it.
  for (const DimSharding &ds : cfg.shard)
    if (ds.dim == "batch" && std::find(ds.axes.begin(), ds.axes.end(), "ep") == ds.axes.end())
      error(ds.loc.isValid() ? ds.loc : epLoc,
            "'batch' must be sharded over ep: its ranks take different tokens, as dp's do",
            cfg.axisSize("dp") > 1 ? "shard { batch = (dp, ep), experts = ep }"
                                   : "shard { batch = ep, experts = ep }");
  // The dims ep splits besides the batch are the expert weights': each must be a dim of some
  // parameter, or ep would split activations only, which is not expert parallelism.
  std::set<std::string> paramDims;
  for (const Op &op : program_.forward.ops)
    if (op.name == "param")
      for (const NamedDim &d : op.type.dims)
        paramDims.insert(d.name);
  bool expertDim = false;
  for (const DimSharding &ds : cfg.shard) {
    if (ds.dim == "batch" || std::find(ds.axes.begin(), ds.axes.end(), "ep") == ds.axes.end())
      continue;
    expertDim = true;
    if (dims_.count(ds.dim) && !paramDims.count(ds.dim))
      error(ds.loc, "'" + ds.dim + "' is sharded over ep but is a dim of no parameter",
            "ep splits the expert weights along the dim that numbers the experts, e.g. "
            "shard { experts = ep }");
  }
  if (!expertDim)
    error(epLoc, "mesh axis 'ep' has " + ranks + " ranks but no dim is sharded over it",
          "expert parallelism splits the expert weights: shard { experts = ep }");
}
