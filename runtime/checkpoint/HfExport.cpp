//===- HfExport.cpp - Writing weights as a Hugging Face folder ------------===//

#include "runtime/checkpoint/HfExport.h"

#include "common/support/Float16.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Json.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <unistd.h>

namespace tessel::rt {

namespace fs = std::filesystem;

namespace {

/// The files of a model folder besides its weights that describe the model and its tokenizer.
const char *const kCopiedFiles[] = {
    "config.json",         "generation_config.json", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
    "vocab.json",          "merges.txt",             "added_tokens.json",
    "chat_template.jinja",
};

/// Dtype names config.json gives the weights' type by.
const char *torchDtypeName(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return "bfloat16";
  case DType::F16:
    return "float16";
  default:
    return "float32";
  }
}

/// A tensor to write: its dtype and bytes (owned).
struct OutTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// `values` stored as `dtype` (F16 and BF16 rounded to nearest even). Fails on a value that is
/// not finite or, in F16, out of its range: nothing non-finite is ever saved.
bool encode(const std::string &name, const std::vector<float> &values, DType dtype,
            std::vector<uint8_t> &out, std::string &error) {
  out.resize(values.size() * static_cast<size_t>(dtypeSize(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) {
      error = "'" + name + "' holds a non-finite value (element " + std::to_string(i) +
              "): not exported";
      return false;
    }
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v, 4);
      continue;
    }
    const uint16_t h = dtype == DType::BF16 ? floatToBf16(v) : floatToHalf(v);
    const float back = dtype == DType::BF16 ? bf16ToFloat(h) : halfToFloat(h);
    if (!std::isfinite(back)) {
      error = "'" + name + "' holds " + std::to_string(v) + " (element " + std::to_string(i) +
              "), beyond F16's range: export in bf16 or f32";
      return false;
    }
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return true;
}

/// The stored tensor widened to F32.
std::vector<float> widen(const SafetensorsTensor &t) {
  std::vector<float> out(static_cast<size_t>(shapeElements(t.shape)));
  widenToF32(t.dtype, t.bytes.data(), static_cast<int64_t>(out.size()), out.data());
  return out;
}

bool isFloat(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

/// "model-00001-of-00003.safetensors".
std::string shardName(size_t k, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", k, n);
  return buf;
}

} // namespace

bool exportHf(const HfWeights &source, const std::vector<ExportedParameter> &params,
              const ParameterReader &read, const HfExportOptions &options,
              HfExportReport &report, std::string &error) {
  const std::string &dest = options.destination;
  std::error_code ec;
  if (fs::exists(dest, ec) && !(fs::is_directory(dest, ec) && fs::is_empty(dest, ec))) {
    error = dest + " exists and is not an empty directory: name a new one";
    return false;
  }
  if (source.folder().empty() || !fs::exists(source.folder() + "/config.json", ec)) {
    error = "the weights at " + source.path() +
            " come without a config.json: export with the Hugging Face model folder the spec "
            "loads from";
    return false;
  }
  // The pieces each stored tensor's parameters replace.
  std::map<std::string, std::vector<const ExportedParameter *>> pieces;
  for (const ExportedParameter &p : params) {
    const std::string stored = source.resolve(p.source);
    if (stored.empty()) {
      error = "parameter '" + p.name + "' loads '" + p.source + "', which " + source.path() +
              " does not hold";
      return false;
    }
    pieces[stored].push_back(&p);
  }

  std::vector<OutTensor> tensors;
  for (const std::string &name : source.names()) {
    const SafetensorsTensor *t = source.tensor(name);
    OutTensor out{name, t->dtype, t->shape, {}};
    const bool convert = options.dtype && isFloat(t->dtype) && *options.dtype != t->dtype;
    if (convert)
      out.dtype = *options.dtype;
    auto it = pieces.find(name);
    if (it == pieces.end() && !convert) {
      // Not trained here: the stored bytes as they are.
      out.bytes.assign(t->bytes.begin(), t->bytes.end());
      tensors.push_back(std::move(out));
      continue;
    }
    std::vector<float> whole = widen(*t), values;
    if (it != pieces.end()) {
      for (const ExportedParameter *p : it->second) {
        PieceLayout layout;
        std::string why;
        if (!pieceLayout(t->shape, p->slice, layout, why)) {
          error = "parameter '" + p->name + "' loads " + why + " of '" + name + "'";
          return false;
        }
        if (shapeElements(layout.shape) != shapeElements(p->shape)) {
          error = "parameter '" + p->name + "' is " + formatShape(p->shape) + " but '" + name +
                  "' gives it " + formatShape(layout.shape);
          return false;
        }
        if (!read(*p, values, error))
          return false;
        for (int64_t o = 0; o < layout.outer; ++o)
          std::memcpy(whole.data() + o * layout.stride + layout.first,
                      values.data() + o * layout.inner,
                      static_cast<size_t>(layout.inner) * sizeof(float));
      }
      ++report.trained;
    }
    if (!encode(name, whole, out.dtype, out.bytes, error))
      return false;
    tensors.push_back(std::move(out));
  }

  // Shards of at most maxShardBytes (a tensor larger than that is a shard of its own), in the
  // source's name order.
  std::vector<std::vector<size_t>> shards(1);
  uint64_t inShard = 0, total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = tensors[i].bytes.size();
    if (!shards.back().empty() && inShard + n > options.maxShardBytes) {
      shards.emplace_back();
      inShard = 0;
    }
    shards.back().push_back(i);
    inShard += n;
    total += n;
  }

  // Written beside the destination, then renamed into place.
  const fs::path target = fs::absolute(fs::path(dest), ec).lexically_normal();
  const std::string temp =
      (target.parent_path() / ("." + target.filename().string() + ".tmp-" +
                               std::to_string(::getpid())))
          .string();
  fs::remove_all(temp, ec);
  if (!fs::create_directories(temp, ec)) {
    error = "cannot create " + temp + ": " + ec.message();
    return false;
  }
  auto fail = [&](const std::string &why) {
    fs::remove_all(temp, ec);
    error = why;
    return false;
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  Json weightMap = Json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file =
        shards.size() == 1 ? "model.safetensors" : shardName(k + 1, shards.size());
    std::vector<TensorView> views;
    for (size_t i : shards[k]) {
      views.push_back({tensors[i].name, tensors[i].dtype, tensors[i].shape,
                       tensors[i].bytes.empty() ? nullptr : tensors[i].bytes.data()});
      weightMap.set(tensors[i].name, file);
    }
    if (!writeSafetensors(temp + "/" + file, views, metadata, error))
      return fail(error);
  }
  if (shards.size() > 1) {
    Json index = Json::object();
    Json meta = Json::object();
    meta.set("total_size", static_cast<int64_t>(total));
    index.set("metadata", meta);
    index.set("weight_map", weightMap);
    if (!writeFileAtomically(temp + "/model.safetensors.index.json", index.pretty() + "\n",
                             error))
      return fail(error);
  }
  // The model's description and its tokenizer, as they are; config.json's dtype follows the
  // weights when they change type.
  const std::string folder = source.folder();
  for (const char *name : kCopiedFiles) {
    const std::string from = folder.empty() ? "" : folder + "/" + name;
    if (from.empty() || !fs::exists(from, ec))
      continue;
    std::string text;
    if (!readWholeFile(from, 256ull << 20, text, error))
      return fail(error);
    if (std::string(name) == "config.json" && options.dtype) {
      auto config = Json::parse(text, from, error);
      if (!config)
        return fail(error);
      for (const char *key : {"torch_dtype", "dtype"})
        if (config->find(key) || std::string(key) == "torch_dtype")
          config->set(key, torchDtypeName(*options.dtype));
      text = config->pretty() + "\n";
    }
    if (!writeFileAtomically(temp + "/" + name, text, error))
      return fail(error);
  }
  fs::remove(target, ec); // An empty destination, checked above.
  fs::rename(temp, target, ec);
  if (ec)
    return fail("cannot move the export into " + dest + ": " + ec.message());
  std::string ignored;
  fsyncDirectory(target.parent_path().string(), ignored);
  report.tensors = tensors.size();
  report.shards = shards.size();
  report.bytes = total;
  return true;
}

} // namespace tessel::rt
