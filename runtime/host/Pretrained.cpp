//===- Pretrained.cpp - Starting a run from pretrained weights ------------===//

#include "runtime/host/Pretrained.h"

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/HfExport.h"
#include "runtime/checkpoint/HfWeights.h"
#include "runtime/core/Blocks.h"
#include "runtime/host/Ranks.h"
#include "runtime/host/Trainer.h"

#include <cstdio>
#include <set>

namespace tessel::rt {

namespace {

/// The piece of its stored tensor a loaded parameter is (the plan's [part, parts, axis, rows],
/// or the whole tensor); false when the plan gives a malformed one.
bool sliceOf(const planfile::StateTensor &t, StoredSlice &slice, std::string &error) {
  if (t.initSlice.empty()) {
    slice = StoredSlice{};
    return true;
  }
  if (t.initSlice.size() != 4) {
    error = "the plan gives parameter '" + t.name + "' a malformed slice of its stored tensor";
    return false;
  }
  slice = StoredSlice{t.initSlice[0], t.initSlice[1], t.initSlice[2], t.initSlice[3]};
  return true;
}

} // namespace

std::vector<size_t> loadedParameters(const planfile::Plan &plan) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.state.size(); ++i)
    if (plan.state[i].role == "param" && plan.state[i].init == "load")
      out.push_back(i);
  return out;
}

bool loadPretrained(const planfile::Plan &plan, Ranks &ranks, const std::string &path,
                    PretrainedLoad &report, std::string &error) {
  auto weights = HfWeights::open(path, error);
  if (!weights)
    return false;
  std::set<std::string> used;
  std::vector<float> whole;
  for (size_t i : loadedParameters(plan)) {
    const planfile::StateTensor &t = plan.state[i];
    StoredSlice slice;
    if (!sliceOf(t, slice, error) ||
        !weights->read(t.name, ranks.stateShape(i), t.initSource, slice, whole, error))
      return false;
    ranks.setWholeState(i, whole.data());
    used.insert(weights->resolve(t.initSource));
    ++report.parameters;
    report.values += static_cast<double>(whole.size());
  }
  for (const std::string &name : weights->names())
    if (!used.count(name) && report.unused++ == 0)
      report.firstUnused = name;
  return true;
}

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "tessel: error: %s\n", message.c_str());
  return 1;
}

} // namespace

int exportHuggingFace(const planfile::Plan &plan, const RunOptions &options) {
  const std::string sourcePath =
      options.initFrom ? *options.initFrom
                       : [&] {
                           const planfile::Attr *a = plan.findConfig("train.init_from");
                           const auto *s = a ? std::get_if<std::string>(&a->value) : nullptr;
                           return s ? *s : std::string();
                         }();
  if (sourcePath.empty() || !HfWeights::looksLike(sourcePath))
    return fail("--export-hf writes the Hugging Face folder the spec loads from, and " +
                (sourcePath.empty() ? std::string("none is named")
                                    : "'" + sourcePath + "' is none") +
                ": pass --init-from DIR (the folder tessel import-hf read)");
  std::string checkpoint = options.checkpoint;
  if (checkpoint.empty())
    if (const planfile::Attr *a = plan.findConfig("train.checkpoint_dir"))
      if (const auto *s = std::get_if<std::string>(&a->value))
        checkpoint = *s;
  if (checkpoint.empty())
    return fail("--export-hf needs --checkpoint PATH (a checkpoint, or a run directory whose "
                "newest checkpoint to export)");
  std::string error;
  auto source = HfWeights::open(sourcePath, error);
  if (!source)
    return fail(error);
  auto ck = loadCheckpoint(checkpoint, error);
  if (!ck)
    return fail(error);

  std::vector<ExportedParameter> params;
  std::vector<std::string> left;
  for (const planfile::StateTensor &t : plan.state) {
    if (t.role != "param")
      continue;
    std::vector<int64_t> shape = blockOf(plan, t.shape, t.split, 0).whole;
    if (t.init != "load") {
      left.push_back(t.name);
      continue;
    }
    const StoredTensor *stored = ck->find(t.name);
    if (!stored)
      return fail("checkpoint " + ck->path + " lacks '" + t.name + "'");
    if (stored->shape != shape)
      return fail("checkpoint " + ck->path + ": '" + t.name + "' is " +
                  formatShape(stored->shape) + ", the model's " + formatShape(shape));
    StoredSlice slice;
    if (!sliceOf(t, slice, error))
      return fail(error);
    params.push_back({t.name, shape, t.initSource, slice});
  }
  if (params.empty())
    return fail("the spec loads no parameter from Hugging Face weights (load(...)): nothing "
                "maps its parameters to a folder's tensors");
  HfExportOptions o;
  o.destination = options.exportHf;
  o.maxShardBytes = options.maxShardBytes;
  if (!options.exportDtype.empty())
    o.dtype = options.exportDtype == "bf16"  ? DType::BF16
              : options.exportDtype == "f16" ? DType::F16
                                             : DType::F32;
  auto read = [&](const ExportedParameter &p, std::vector<float> &out, std::string &why) {
    out.resize(static_cast<size_t>(shapeElements(p.shape)));
    return ck->readBlock(p.name, std::vector<int64_t>(p.shape.size(), 0), p.shape, out.data(),
                         why);
  };
  HfExportReport report;
  if (!exportHf(*source, params, read, o, report, error))
    return fail(error);
  if (!options.quiet) {
    std::printf("exported %s (step %lld) to %s: %zu tensors, %zu of them the model's parameters, "
                "%.1f MB in %zu file%s, with %s's config and tokenizer\n",
                ck->path.c_str(), static_cast<long long>(ck->step), options.exportHf.c_str(),
                report.tensors, report.trained, static_cast<double>(report.bytes) / 1e6,
                report.shards, report.shards == 1 ? "" : "s", sourcePath.c_str());
    if (!left.empty())
      std::printf("note: %zu parameter%s the folder has no place for, not exported ('%s'%s)\n",
                  left.size(), left.size() == 1 ? "" : "s", left[0].c_str(),
                  left.size() > 1 ? ", ..." : "");
  }
  return 0;
}

} // namespace tessel::rt
