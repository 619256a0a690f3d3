//===- HfExport.h - Writing weights as a Hugging Face folder ------*- C++ -*-===//
//
// The inverse of a pretrained start (HfWeights.h): a checkpoint's parameters written back in
// the layout of the Hugging Face folder the spec loads from, so that transformers (or any
// tool that reads the format) loads the trained model. Every tensor of the source folder is
// written under its own name, shape and (unless asked otherwise) dtype: the parts the spec's
// parameters load from hold their trained values, the rest (the rows of a position table past
// the sequence, a buffer) are copied unchanged; config.json, the tokenizer's files and
// generation_config.json are copied. The weights go into model.safetensors with metadata
// {"format": "pt"}, or past the shard size into model-0000k-of-0000n.safetensors with a
// model.safetensors.index.json. The folder is written beside its destination and renamed
// into place, so an interrupted export leaves nothing half written.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CHECKPOINT_HFEXPORT_H
#define TESSEL_RUNTIME_CHECKPOINT_HFEXPORT_H

#include "runtime/checkpoint/HfWeights.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessel::rt {

/// A parameter as the export sees it: its name and whole shape, and the stored tensor (and
/// piece) it loads.
struct ExportedParameter {
  std::string name;
  std::vector<int64_t> shape;
  std::string source;
  StoredSlice slice;
};

struct HfExportOptions {
  std::string destination;
  /// The dtype of every float tensor written; nullopt: each tensor's dtype in the source.
  std::optional<DType> dtype;
  /// Past this many bytes of tensors, the weights are sharded (Hugging Face's default 5 GB).
  uint64_t maxShardBytes = 5'000'000'000ull;
};

struct HfExportReport {
  /// Tensors written, those holding parameters' values, files of weights.
  size_t tensors = 0, trained = 0, shards = 0;
  uint64_t bytes = 0;
};

/// Reads a parameter's whole tensor (F32) into the vector; false with an error naming it.
using ParameterReader =
    std::function<bool(const ExportedParameter &, std::vector<float> &, std::string &)>;

/// Writes `source`'s tensors, with the pieces `params` load replaced by what `read` returns for
/// them, as a Hugging Face folder at options.destination (which must not exist, or be empty).
bool exportHf(const HfWeights &source, const std::vector<ExportedParameter> &params,
              const ParameterReader &read, const HfExportOptions &options,
              HfExportReport &report, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CHECKPOINT_HFEXPORT_H
