//===- ImportHfImpl.h - Shared by the parts of import-hf --------*- C++ -*-===//
//
// `tessel import-hf` is split by concern: ImportHf.cpp is the command (its options, the checks
// of the folder's tensors against the spec, the spec's text); ImportHfTensors.cpp reads the
// folder's safetensors headers; ImportHfArchitectures.cpp writes each architecture family's
// blocks and the stored tensor names they load. They share config.json's accessors, the spec
// being written and the error they report.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_TOOLS_IMPORTHFIMPL_H
#define TESSEL_TOOLS_IMPORTHFIMPL_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessel::importhf {

using llvm::StringRef;
namespace json = llvm::json;

/// An error in the folder: reported as "tessel: error: <where>: <what>".
struct ImportError {
  std::string message;
};

//===----------------------------------------------------------------------===//
// config.json
//===----------------------------------------------------------------------===//

class Config {
public:
  Config(std::string path, json::Object object) : path_(std::move(path)), o_(std::move(object)) {}

  const std::string &path() const { return path_; }
  bool has(StringRef key) const {
    const json::Value *v = o_.get(key);
    return v && v->kind() != json::Value::Null;
  }
  /// A required positive integer, or the first of `keys` present (GPT-2 and Llama name the
  /// same settings differently).
  int64_t integer(std::initializer_list<const char *> keys, std::optional<int64_t> fallback = {},
                  int64_t min = 1) const {
    for (const char *key : keys) {
      if (!has(key))
        continue;
      std::optional<int64_t> v = o_.getInteger(key);
      if (!v)
        if (std::optional<double> d = o_.getNumber(key); d && *d == static_cast<int64_t>(*d))
          v = static_cast<int64_t>(*d);
      if (!v || *v < min)
        throw ImportError{path_ + ": '" + key + "' should be an integer of at least " +
                          std::to_string(min)};
      return *v;
    }
    if (fallback)
      return *fallback;
    throw ImportError{path_ + ": '" + *keys.begin() + "' is missing"};
  }
  double number(const char *key, std::optional<double> fallback = {}) const {
    if (!has(key)) {
      if (fallback)
        return *fallback;
      throw ImportError{path_ + ": '" + key + "' is missing"};
    }
    std::optional<double> v = o_.getNumber(key);
    if (!v || !(*v > 0))
      throw ImportError{path_ + ": '" + key + "' should be a positive number"};
    return *v;
  }
  bool flag(const char *key, bool fallback) const {
    if (!has(key))
      return fallback;
    std::optional<bool> v = o_.getBoolean(key);
    if (!v)
      throw ImportError{path_ + ": '" + key + "' should be true or false"};
    return *v;
  }
  std::string string(const char *key, std::string fallback = "") const {
    if (!has(key))
      return fallback;
    std::optional<StringRef> v = o_.getString(key);
    if (!v)
      throw ImportError{path_ + ": '" + key + "' should be a string"};
    return v->str();
  }
  const json::Object &object() const { return o_; }

private:
  std::string path_;
  json::Object o_;
};

//===----------------------------------------------------------------------===//
// The folder's tensors (safetensors headers only)
//===----------------------------------------------------------------------===//

struct StoredTensor {
  std::string dtype, file;
  std::vector<int64_t> shape;
};

/// The tensors of `folder`, by name: from model.safetensors, or from the shards that
/// model.safetensors.index.json names.
std::map<std::string, StoredTensor> readFolderTensors(const std::string &folder);

//===----------------------------------------------------------------------===//
// The spec
//===----------------------------------------------------------------------===//

/// A tensor the spec loads, for checking against the folder: its name (with `{layer}`), the
/// shape config.json implies, and why.
struct Wanted {
  std::string name;
  std::vector<int64_t> shape;
  std::string because;
};

/// The spec being written and the tensors it loads.
struct Spec {
  std::string blocks, model, comment;
  std::vector<Wanted> loads;
  int64_t layers = 0;
  int64_t contextLength = 0; ///< The longest sequence the weights support (0: any).
  std::string prefix;        ///< Of every stored name (GPT-2 saved with "transformer.").
  /// Tensors the folder may hold that the spec reads nothing of (buffers, a tied head).
  std::vector<std::string> ignorable;

  /// `load("<prefix>name" ...)` for a parameter of `shape`, from a stored tensor of
  /// `storedShape` (its shape when cut: `slice` is what follows the name in load()).
  std::string load(const std::string &name, std::vector<int64_t> storedShape,
                   const std::string &because, const std::string &slice = "") {
    std::string full = prefix + name;
    bool seen = false;
    for (const Wanted &e : loads)
      seen |= e.name == full;
    if (!seen)
      loads.push_back({full, std::move(storedShape), because});
    return "load(\"" + full + "\"" + (slice.empty() ? "" : ", " + slice) + ")";
  }
};

/// Writes the blocks and the forward body of a Llama-family model (llama, mistral, qwen2,
/// qwen3: `type` is config.json's model_type) into `spec`, `dims` and `forward`.
void writeLlama(const Config &c, const std::string &type, Spec &spec,
                std::map<std::string, int64_t> &dims, std::string &forward);
/// Writes the blocks and the forward body of GPT-2; `stored` tells the names' prefix.
void writeGpt2(const Config &c, const std::map<std::string, StoredTensor> &stored, Spec &spec,
               std::map<std::string, int64_t> &dims, std::string &forward);

} // namespace tessel::importhf

#endif // TESSEL_TOOLS_IMPORTHFIMPL_H
