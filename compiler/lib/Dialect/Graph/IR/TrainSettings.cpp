//===- TrainSettings.cpp - Reading the module's training settings ---------===//

#include "tessel/Dialect/Graph/IR/TrainSettings.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace {

void read(DictionaryAttr dict, StringRef key, int64_t &out) {
  if (auto a = dict ? dyn_cast_or_null<IntegerAttr>(dict.get(key)) : IntegerAttr())
    out = a.getInt();
}
void read(DictionaryAttr dict, StringRef key, double &out) {
  if (auto a = dict ? dyn_cast_or_null<FloatAttr>(dict.get(key)) : FloatAttr())
    out = a.getValueAsDouble();
}
void read(DictionaryAttr dict, StringRef key, std::string &out) {
  if (auto a = dict ? dyn_cast_or_null<StringAttr>(dict.get(key)) : StringAttr())
    out = a.str();
}
DictionaryAttr sub(DictionaryAttr dict, StringRef key) {
  return dict ? dyn_cast_or_null<DictionaryAttr>(dict.get(key)) : DictionaryAttr();
}

} // namespace

tessel::TrainSettings tessel::readTrainSettings(ModuleOp module) {
  TrainSettings s;
  auto train = module->getAttrOfType<DictionaryAttr>("tessel.train");
  read(train, "batch", s.batch);
  read(train, "micro_batch", s.microBatch);
  read(train, "accumulation", s.accumulation);
  read(train, "steps", s.steps);
  read(train, "clip", s.clip);
  read(train, "data", s.data);
  read(train, "tokenizer", s.tokenizer);
  read(train, "precision", s.precision);
  read(train, "seed", s.seed);
  read(train, "eval_every", s.evalEvery);
  read(train, "eval_batches", s.evalBatches);
  read(train, "eval_fraction", s.evalFraction);
  read(train, "checkpoint_every", s.checkpointEvery);
  read(train, "checkpoint_dir", s.checkpointDir);
  read(train, "log_every", s.logEvery);
  DictionaryAttr opt = sub(train, "optimizer");
  read(opt, "kind", s.optimizer);
  read(opt, "lr", s.lr);
  read(opt, "beta1", s.beta1);
  read(opt, "beta2", s.beta2);
  read(opt, "eps", s.eps);
  read(opt, "weight_decay", s.weightDecay);
  read(opt, "decay", s.decay);
  read(opt, "momentum", s.momentum);
  DictionaryAttr sched = sub(train, "lr_schedule");
  read(sched, "kind", s.schedule);
  read(sched, "warmup", s.warmup);
  read(sched, "min_lr", s.minLr);
  return s;
}

int64_t tessel::readDimSize(ModuleOp module, StringRef name) {
  int64_t size = -1;
  read(module->getAttrOfType<DictionaryAttr>("tessel.dims"), name, size);
  return size;
}
