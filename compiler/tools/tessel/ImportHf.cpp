//===- ImportHf.cpp - tessel import-hf ------------------------------------===//
//
// Reads a Hugging Face model folder and writes a `.model` spec of its architecture. The spec
// is ordinary Tessel: blocks over named dims, each parameter declared in the dim order of the
// tensor it loads (`load("model.layers.{layer}.mlp.up_proj.weight")`), so that the runtime
// reads the weights without transposing anything, and a `parallel` and a `train` section the
// user edits. Everything config.json says that the spec cannot express (an activation, a
// rope scaling, biases where the architecture has none) is refused by name, and every tensor
// the spec loads is checked against the folder — present, a float, of the shape config.json
// implies — before the spec is written.
//
//===----------------------------------------------------------------------===//

#include "ImportHf.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace tessel {
namespace {

cl::SubCommand importCommand("import-hf",
                             "Write a .model spec of a Hugging Face model folder (GPT-2, Llama, "
                             "Mistral, Qwen2, Qwen3) whose parameters start from its weights");
cl::opt<std::string> folderArg(cl::Positional, cl::desc("<model folder>"), cl::Required,
                               cl::sub(importCommand));
cl::opt<std::string> outputArg("o", cl::desc("The spec to write"), cl::value_desc("NAME.model"),
                               cl::Required, cl::sub(importCommand));
cl::opt<std::string> nameArg("name",
                             cl::desc("The model's name in the spec (default: from the output "
                                      "file's name)"),
                             cl::sub(importCommand));
cl::opt<int64_t> seqArg("seq",
                        cl::desc("Tokens per training sequence (default: the model's context, "
                                 "at most 1024)"),
                        cl::init(0), cl::sub(importCommand));
cl::opt<int64_t> batchArg("batch", cl::desc("Sequences per optimizer step (default 8)"),
                          cl::init(8), cl::sub(importCommand));
cl::opt<int64_t> microBatchArg("micro-batch",
                               cl::desc("Sequences per forward/backward pass (default: batch)"),
                               cl::init(0), cl::sub(importCommand));
cl::opt<int64_t> stepsArg("steps", cl::desc("Optimizer steps (default 1000)"), cl::init(1000),
                          cl::sub(importCommand));
cl::opt<std::string> dataArg("data",
                             cl::desc("Training data: token files (tessel tokenize writes them; "
                                      "default data/train.bin)"),
                             cl::init("data/train.bin"), cl::sub(importCommand));
cl::opt<std::string> precisionArg("precision",
                                  cl::desc("fp32 or bf16 (default: bf16 for weights stored in "
                                           "16 bits, else fp32)"),
                                  cl::sub(importCommand));

/// An error in the folder: reported as "tessel: error: <where>: <what>".
struct ImportError {
  std::string message;
};

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The shortest text that reads back as `v` (the spec's numbers are parsed as doubles).
std::string formatNumber(double v) {
  // Whole numbers as integers (rope theta 500000, not 5e+05).
  if (v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 1e15)
    return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

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

/// Reads the JSON header of a safetensors file: names, dtypes, shapes.
void readHeader(const std::string &path, std::map<std::string, StoredTensor> &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ImportError{path + ": cannot be read"};
  uint8_t lenBytes[8];
  if (!in.read(reinterpret_cast<char *>(lenBytes), 8))
    throw ImportError{path + ": not a safetensors file (shorter than its 8-byte header length)"};
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i)
    len = len << 8 | lenBytes[i];
  uint64_t size = 0;
  if (sys::fs::file_size(path, size) || len > size - 8 || len > (100u << 20))
    throw ImportError{path + ": not a safetensors file (a header of " + std::to_string(len) +
                      " bytes)"};
  std::string text(len, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(len)))
    throw ImportError{path + ": truncated inside its header"};
  Expected<json::Value> header = json::parse(text);
  if (!header)
    throw ImportError{path + ": its header is not JSON (" + toString(header.takeError()) + ")"};
  const json::Object *o = header->getAsObject();
  if (!o)
    throw ImportError{path + ": its header is not a JSON object"};
  for (const auto &[key, value] : *o) {
    if (key == "__metadata__")
      continue;
    const json::Object *t = value.getAsObject();
    const json::Array *shape = t ? t->getArray("shape") : nullptr;
    std::optional<StringRef> dtype = t ? t->getString("dtype") : std::nullopt;
    if (!shape || !dtype)
      throw ImportError{path + ": tensor '" + key.str() + "' has no dtype or shape"};
    StoredTensor st;
    st.dtype = dtype->str();
    st.file = path;
    for (const json::Value &d : *shape) {
      std::optional<int64_t> n = d.getAsInteger();
      if (!n || *n < 0)
        throw ImportError{path + ": tensor '" + key.str() + "' has a malformed shape"};
      st.shape.push_back(*n);
    }
    out[key.str()] = std::move(st);
  }
}

std::map<std::string, StoredTensor> readFolderTensors(const std::string &folder) {
  std::map<std::string, StoredTensor> tensors;
  SmallString<256> index(folder), single(folder);
  sys::path::append(index, "model.safetensors.index.json");
  sys::path::append(single, "model.safetensors");
  if (sys::fs::exists(index)) {
    auto buffer = MemoryBuffer::getFile(index);
    if (!buffer)
      throw ImportError{std::string(index) + ": cannot be read"};
    Expected<json::Value> v = json::parse((*buffer)->getBuffer());
    if (!v)
      throw ImportError{std::string(index) + ": not JSON (" + toString(v.takeError()) + ")"};
    const json::Object *map = v->getAsObject() ? v->getAsObject()->getObject("weight_map")
                                               : nullptr;
    if (!map)
      throw ImportError{std::string(index) + ": no \"weight_map\" object"};
    std::set<std::string> files;
    for (const auto &[name, file] : *map) {
      std::optional<StringRef> f = file.getAsString();
      if (!f || f->contains('/'))
        throw ImportError{std::string(index) + ": \"weight_map\" gives '" + name.str() +
                          "' no file name of this folder"};
      files.insert(f->str());
    }
    for (const std::string &f : files) {
      SmallString<256> path(folder);
      sys::path::append(path, f);
      readHeader(std::string(path), tensors);
    }
    for (const auto &[name, file] : *map)
      if (!tensors.count(name.str()))
        throw ImportError{std::string(index) + ": '" + name.str() + "' is not in " +
                          file.getAsString()->str()};
  } else if (sys::fs::exists(single)) {
    readHeader(std::string(single), tensors);
  } else {
    throw ImportError{folder + ": neither model.safetensors nor model.safetensors.index.json "
                               "(only safetensors weights are read; convert a "
                               "pytorch_model.bin with transformers' save_pretrained)"};
  }
  return tensors;
}

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

/// The architecture family of a model_type, and what its config must say.
enum class Family { Gpt2, Llama };

std::string identifier(StringRef text) {
  std::string id;
  for (char c : text)
    id += isAlnum(c) || c == '_' ? c : '_';
  if (id.empty() || isDigit(id[0]))
    id = "m_" + id;
  // The spec language's keywords are not names.
  for (const char *keyword : {"import", "model", "dims", "block", "forward", "param", "init",
                              "return", "repeat", "parallel", "train"})
    if (id == keyword)
      return id + "_hf";
  return id;
}

void writeLlama(const Config &c, const std::string &type, Spec &spec,
                std::map<std::string, int64_t> &dims, std::string &forward) {
  const int64_t embed = c.integer({"hidden_size"});
  const int64_t heads = c.integer({"num_attention_heads"});
  const int64_t kvHeads = c.integer({"num_key_value_heads"}, heads);
  if (heads % kvHeads != 0)
    throw ImportError{c.path() + ": num_key_value_heads (" + std::to_string(kvHeads) +
                      ") does not divide num_attention_heads (" + std::to_string(heads) + ")"};
  if (!c.has("head_dim") && embed % heads != 0)
    throw ImportError{c.path() + ": hidden_size (" + std::to_string(embed) +
                      ") is not a multiple of num_attention_heads and no head_dim is given"};
  const int64_t head = c.integer({"head_dim"}, embed / heads);
  if (head % 2 != 0)
    throw ImportError{c.path() + ": head_dim " + std::to_string(head) +
                      " is odd, and rotary embeddings pair a head's features"};
  const int64_t ffn = c.integer({"intermediate_size"});
  const int64_t vocab = c.integer({"vocab_size"});
  const double eps = c.number("rms_norm_eps", 1e-6);
  // transformers 5 keeps rope_theta (and the scaling) in rope_parameters.
  const json::Object *rope = c.object().getObject("rope_parameters");
  double theta = 10000.0;
  if (c.has("rope_theta"))
    theta = c.number("rope_theta");
  else if (rope && rope->getNumber("rope_theta"))
    theta = *rope->getNumber("rope_theta");
  const std::string act = c.string("hidden_act", "silu");
  if (act != "silu")
    throw ImportError{c.path() + ": 'hidden_act' is \"" + act +
                      "\"; the gated MLP of this family is imported with silu only"};
  // Rotary frequencies: rope_scaling (transformers 4) or rope_parameters (5): none, or Llama
  // 3.1's rescaling of the low frequencies.
  std::string scaling;
  if (c.has("rope_scaling") || rope) {
    const json::Object *r = c.has("rope_scaling") ? c.object().getObject("rope_scaling") : rope;
    const std::string key = c.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (!r)
      throw ImportError{c.path() + ": '" + key + "' should be an object"};
    std::string kind = "default";
    if (auto t = r->getString("rope_type") ? r->getString("rope_type") : r->getString("type"))
      kind = t->str();
    auto field = [&](const char *name, std::optional<double> fallback) {
      std::optional<double> v = r->getNumber(name);
      if (!v && fallback)
        return *fallback;
      if (!v || !(*v > 0))
        throw ImportError{c.path() + ": '" + key + "." + name +
                          "' should be a positive number"};
      return *v;
    };
    if (kind == "llama3") {
      const double factor = field("factor", {}), low = field("low_freq_factor", {});
      const double high = field("high_freq_factor", {});
      std::optional<double> context;
      if (std::optional<int64_t> m = c.object().getInteger("max_position_embeddings"))
        context = static_cast<double>(*m);
      const double original = field("original_max_position_embeddings", context);
      if (!(high > low))
        throw ImportError{c.path() + ": '" + key + "': high_freq_factor must exceed "
                                                   "low_freq_factor"};
      scaling = ",\n             scaling_factor = " + formatNumber(factor) +
                ", low_freq_factor = " + formatNumber(low) +
                ", high_freq_factor = " + formatNumber(high) +
                ", original_context = " + formatNumber(original);
    } else if (kind != "default") {
      throw ImportError{c.path() + ": '" + key + "' of type \"" + kind +
                        "\" is not supported (plain and llama3 rotary frequencies are)"};
    }
  }
  const bool qwen2 = type == "qwen2", qwen3 = type == "qwen3";
  // Llama may put biases on all four projections; Qwen2 has them on q, k and v.
  const bool qkvBias = qwen2 || c.flag("attention_bias", false);
  const bool outBias = !qwen2 && !qwen3 && c.flag("attention_bias", false);
  if (qwen3 && c.flag("attention_bias", false))
    throw ImportError{c.path() + ": 'attention_bias' true is not supported for qwen3"};
  if (c.flag("mlp_bias", false))
    throw ImportError{c.path() + ": 'mlp_bias' true is not supported (the MLP has no biases)"};
  // Mistral's sliding window: position i sees keys j with i - j < W. Qwen2 and Qwen3 name a
  // window too, but use it only with use_sliding_window (and then on some layers only).
  std::string window;
  if (qwen2 || qwen3) {
    if (c.flag("use_sliding_window", false))
      throw ImportError{c.path() + ": 'use_sliding_window' is true: Qwen's per-layer sliding "
                                   "windows are not imported"};
  } else if (c.has("sliding_window")) {
    window = ", window = " + std::to_string(c.integer({"sliding_window"}));
  }
  const bool tied = c.flag("tie_word_embeddings", false);
  spec.layers = c.integer({"num_hidden_layers"});
  spec.contextLength = c.integer({"max_position_embeddings"}, int64_t(0), 0);
  dims = {{"vocab", vocab}, {"embed", embed}, {"heads", heads}, {"kv_heads", kvHeads},
          {"head", head}, {"ffn", ffn}};

  const std::string L = "model.layers.{layer}.";
  const std::string e = formatNumber(eps);
  auto because = [&](const std::string &what) { return "config.json: " + what; };
  std::string b;
  b += "# Attention: grouped-query when kv_heads < heads, rotary positions on q and k";
  b += qwen3 ? ", q and k\n# normalised per head (RMSNorm over head) before the rotation.\n"
             : ".\n";
  b += "block self_attn(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  auto proj = [&](const char *n, const char *hs) {
    const int64_t h = std::string(hs) == "heads" ? heads : kvHeads;
    b += std::string("  param ") + n + "_proj: [" + hs + ", head, embed] init " +
         spec.load(L + "self_attn." + n + "_proj.weight", {h * head, embed},
                   because(std::string(hs) + " x head, hidden_size")) +
         "\n";
    if (qkvBias)
      b += std::string("  param ") + n + "_bias: [" + hs + ", head] init " +
           spec.load(L + "self_attn." + n + "_proj.bias", {h * head},
                     because(std::string(hs) + " x head")) +
           "\n";
  };
  proj("q", "heads");
  proj("k", "kv_heads");
  proj("v", "kv_heads");
  b += "  param o_proj: [embed, heads, head] init " +
       spec.load(L + "self_attn.o_proj.weight", {embed, heads * head},
                 because("hidden_size, heads x head")) +
       "\n";
  if (outBias)
    b += "  param o_bias: [embed] init " +
         spec.load(L + "self_attn.o_proj.bias", {embed}, because("hidden_size")) + "\n";
  if (qwen3) {
    b += "  param q_norm: [head] init " +
         spec.load(L + "self_attn.q_norm.weight", {head}, because("head_dim")) + "\n";
    b += "  param k_norm: [head] init " +
         spec.load(L + "self_attn.k_norm.weight", {head}, because("head_dim")) + "\n";
  }
  b += "\n";
  const std::string t = formatNumber(theta) + scaling;
  auto projected = [&](const char *n) {
    std::string p = std::string("x @ ") + n + "_proj";
    if (qkvBias)
      p += std::string(" + ") + n + "_bias";
    return p;
  };
  if (qwen3) {
    b += "  q = rope(rmsnorm(" + projected("q") + ", q_norm, eps = " + e + "), theta = " + t +
         ")   # [batch, seq, heads, head]\n";
    b += "  k = rope(rmsnorm(" + projected("k") + ", k_norm, eps = " + e + "), theta = " + t +
         ")   # [batch, seq, kv_heads, head]\n";
  } else {
    b += "  q = rope(" + projected("q") + ", theta = " + t + ")   # [batch, seq, heads, head]\n";
    b += "  k = rope(" + projected("k") + ", theta = " + t + ")   # [batch, seq, kv_heads, head]\n";
  }
  b += "  v = " + projected("v") + "\n";
  b += "  a = attention(q, k, v, causal = true" + window + ")\n";
  b += std::string("  return a @ o_proj") + (outBias ? " + o_bias" : "") + "\n}\n\n";

  b += "# The gated MLP: silu(x gate) * (x up), projected back down.\n";
  b += "block mlp(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  b += "  param gate_proj: [ffn, embed] init " +
       spec.load(L + "mlp.gate_proj.weight", {ffn, embed}, because("intermediate_size, hidden_size")) +
       "\n";
  b += "  param up_proj: [ffn, embed] init " +
       spec.load(L + "mlp.up_proj.weight", {ffn, embed}, because("intermediate_size, hidden_size")) +
       "\n";
  b += "  param down_proj: [embed, ffn] init " +
       spec.load(L + "mlp.down_proj.weight", {embed, ffn}, because("hidden_size, intermediate_size")) +
       "\n";
  b += "  return (silu(x @ gate_proj) * (x @ up_proj)) @ down_proj\n}\n\n";

  b += "# One decoder layer: RMSNorm before each sub-layer, residual adds after.\n";
  b += "block decoder_layer(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  b += "  param input_layernorm: [embed] init " +
       spec.load(L + "input_layernorm.weight", {embed}, because("hidden_size")) + "\n";
  b += "  param post_attention_layernorm: [embed] init " +
       spec.load(L + "post_attention_layernorm.weight", {embed}, because("hidden_size")) + "\n";
  b += "  h = x + self_attn(rmsnorm(x, input_layernorm, eps = " + e + "))\n";
  b += "  return h + mlp(rmsnorm(h, post_attention_layernorm, eps = " + e + "))\n}\n";
  spec.blocks = b;

  std::string f;
  f += "    param embed_tokens: [vocab, embed] init " +
       spec.load("model.embed_tokens.weight", {vocab, embed}, because("vocab_size, hidden_size")) +
       "\n";
  f += "    x = embedding(embed_tokens, tokens)      # [batch, seq, embed]\n";
  f += "    repeat layers { x = decoder_layer(x) }\n";
  f += "    param norm: [embed] init " +
       spec.load("model.norm.weight", {embed}, because("hidden_size")) + "\n";
  f += "    x = rmsnorm(x, norm, eps = " + e + ")\n";
  if (tied) {
    f += "    logits = x @ embed_tokens                # tied: the embedding is the head\n";
    spec.ignorable.push_back("lm_head.weight");
  } else {
    f += "    param lm_head: [vocab, embed] init " +
         spec.load("lm_head.weight", {vocab, embed}, because("vocab_size, hidden_size")) + "\n";
    f += "    logits = x @ lm_head                     # [batch, seq, vocab]\n";
  }
  f += "    return cross_entropy(logits, targets)\n";
  forward = f;
  spec.ignorable.push_back("model.layers.{layer}.self_attn.rotary_emb.inv_freq");
}

void writeGpt2(const Config &c, const std::map<std::string, StoredTensor> &stored, Spec &spec,
               std::map<std::string, int64_t> &dims, std::string &forward) {
  const int64_t embed = c.integer({"n_embd", "hidden_size"});
  const int64_t heads = c.integer({"n_head", "num_attention_heads"});
  if (embed % heads != 0)
    throw ImportError{c.path() + ": n_embd (" + std::to_string(embed) +
                      ") is not a multiple of n_head (" + std::to_string(heads) + ")"};
  const int64_t ffn = c.integer({"n_inner"}, 4 * embed);
  const int64_t vocab = c.integer({"vocab_size"});
  const double eps = c.number("layer_norm_epsilon", 1e-5);
  const std::string act = c.string("activation_function", "gelu_new");
  std::string gelu;
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
    gelu = "gelu";
  else if (act == "gelu")
    gelu = "gelu_erf";
  else
    throw ImportError{c.path() + ": 'activation_function' is \"" + act +
                      "\"; GPT-2 is imported with gelu_new (tanh) or gelu (erf)"};
  if (!c.flag("scale_attn_weights", true) || c.flag("scale_attn_by_inverse_layer_idx", false))
    throw ImportError{c.path() + ": GPT-2's attention is imported with scores scaled by "
                                 "1/sqrt(head) only (scale_attn_weights true, "
                                 "scale_attn_by_inverse_layer_idx false)"};
  const bool tied = c.flag("tie_word_embeddings", true);
  spec.layers = c.integer({"n_layer", "num_hidden_layers"});
  spec.contextLength = c.integer({"n_positions", "max_position_embeddings"});
  // GPT2LMHeadModel.save_pretrained writes "transformer."-prefixed names; the published
  // checkpoints have none.
  spec.prefix = stored.count("transformer.wte.weight") ? "transformer." : "";
  const int64_t head = embed / heads;
  dims = {{"vocab", vocab}, {"embed", embed}, {"heads", heads}, {"head", head}, {"ffn", ffn}};

  const std::string L = "h.{layer}.";
  const std::string e = formatNumber(eps);
  auto because = [&](const std::string &what) { return "config.json: " + what; };
  std::string b;
  b += "# GPT-2's attention keeps q, k and v in one Conv1D matrix, c_attn [embed, 3 embed]:\n";
  b += "# each projection loads its third.\n";
  b += "block attn(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  const char *names[] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i)
    b += std::string("  param ") + names[i] + "_proj: [embed, heads, head] init " +
         spec.load(L + "attn.c_attn.weight", {embed, 3 * embed}, because("n_embd, 3 n_embd"),
                   "part = " + std::to_string(i) + ", parts = 3") +
         "\n";
  for (int i = 0; i < 3; ++i)
    b += std::string("  param ") + names[i] + "_bias: [heads, head] init " +
         spec.load(L + "attn.c_attn.bias", {3 * embed}, because("3 n_embd"),
                   "part = " + std::to_string(i) + ", parts = 3") +
         "\n";
  b += "  param c_proj: [heads, head, embed] init " +
       spec.load(L + "attn.c_proj.weight", {embed, embed}, because("n_embd, n_embd")) + "\n";
  b += "  param c_proj_bias: [embed] init " +
       spec.load(L + "attn.c_proj.bias", {embed}, because("n_embd")) + "\n\n";
  b += "  q = x @ q_proj + q_bias                  # [batch, seq, heads, head]\n";
  b += "  k = x @ k_proj + k_bias\n";
  b += "  v = x @ v_proj + v_bias\n";
  b += "  return attention(q, k, v, causal = true) @ c_proj + c_proj_bias\n}\n\n";

  b += "block mlp(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  b += "  param c_fc: [embed, ffn] init " +
       spec.load(L + "mlp.c_fc.weight", {embed, ffn}, because("n_embd, n_inner")) + "\n";
  b += "  param c_fc_bias: [ffn] init " +
       spec.load(L + "mlp.c_fc.bias", {ffn}, because("n_inner")) + "\n";
  b += "  param c_proj: [ffn, embed] init " +
       spec.load(L + "mlp.c_proj.weight", {ffn, embed}, because("n_inner, n_embd")) + "\n";
  b += "  param c_proj_bias: [embed] init " +
       spec.load(L + "mlp.c_proj.bias", {embed}, because("n_embd")) + "\n";
  b += "  return " + gelu + "(x @ c_fc + c_fc_bias) @ c_proj + c_proj_bias\n}\n\n";

  b += "# One layer, LayerNorm before each sub-layer.\n";
  b += "block layer(x: [batch, seq, embed]) -> [batch, seq, embed] {\n";
  for (const char *ln : {"ln_1", "ln_2"}) {
    b += std::string("  param ") + ln + "_weight: [embed] init " +
         spec.load(L + ln + ".weight", {embed}, because("n_embd")) + "\n";
    b += std::string("  param ") + ln + "_bias: [embed] init " +
         spec.load(L + ln + ".bias", {embed}, because("n_embd")) + "\n";
  }
  b += "  h = x + attn(layernorm(x, ln_1_weight, ln_1_bias, eps = " + e + "))\n";
  b += "  return h + mlp(layernorm(h, ln_2_weight, ln_2_bias, eps = " + e + "))\n}\n";
  spec.blocks = b;

  std::string f;
  f += "    param wte: [vocab, embed] init " +
       spec.load("wte.weight", {vocab, embed}, because("vocab_size, n_embd")) + "\n";
  f += "    # The position table holds n_positions rows; a sequence uses the first seq.\n";
  f += "    param wpe: [seq, embed] init " +
       spec.load("wpe.weight", {spec.contextLength, embed}, because("n_positions, n_embd"),
                 "rows = seq") +
       "\n";
  f += "    x = embedding(wte, tokens) + wpe          # [batch, seq, embed]\n";
  f += "    repeat layers { x = layer(x) }\n";
  f += "    param ln_f_weight: [embed] init " +
       spec.load("ln_f.weight", {embed}, because("n_embd")) + "\n";
  f += "    param ln_f_bias: [embed] init " +
       spec.load("ln_f.bias", {embed}, because("n_embd")) + "\n";
  f += "    x = layernorm(x, ln_f_weight, ln_f_bias, eps = " + e + ")\n";
  if (tied) {
    f += "    logits = x @ wte                          # tied: the token table is the head\n";
    spec.ignorable.push_back("lm_head.weight");
  } else {
    // The head is outside the base model: never prefixed.
    std::string saved = spec.prefix;
    spec.prefix = "";
    f += "    param lm_head: [vocab, embed] init " +
         spec.load("lm_head.weight", {vocab, embed}, because("vocab_size, n_embd")) + "\n";
    spec.prefix = saved;
    f += "    logits = x @ lm_head\n";
  }
  f += "    return cross_entropy(logits, targets)\n";
  forward = f;
  spec.ignorable.push_back(spec.prefix + L + "attn.bias");
  spec.ignorable.push_back(spec.prefix + L + "attn.masked_bias");
}

/// `name` with `{layer}` replaced by `layer`.
std::string atLayer(const std::string &name, int64_t layer) {
  std::string out = name;
  size_t at = out.find("{layer}");
  if (at != std::string::npos)
    out.replace(at, 7, std::to_string(layer));
  return out;
}

/// Checks every tensor the spec loads against the folder; returns the stored tensors the spec
/// reads nothing of (beyond the known buffers).
std::vector<std::string> checkTensors(const Spec &spec,
                                      const std::map<std::string, StoredTensor> &stored,
                                      const std::string &folder, std::string &widest) {
  std::set<std::string> used;
  for (const Wanted &e : spec.loads) {
    const bool repeated = e.name.find("{layer}") != std::string::npos;
    for (int64_t l = 0; l < (repeated ? spec.layers : 1); ++l) {
      const std::string name = atLayer(e.name, l);
      auto it = stored.find(name);
      if (it == stored.end())
        throw ImportError{folder + ": no tensor '" + name + "' (the architecture needs it; " +
                          std::to_string(stored.size()) + " tensors are stored)"};
      const StoredTensor &t = it->second;
      if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16")
        throw ImportError{t.file + ": tensor '" + name + "' is " + t.dtype +
                          "; weights are read from F32, BF16 or F16"};
      if (t.shape != e.shape)
        throw ImportError{t.file + ": tensor '" + name + "' is " + formatShape(t.shape) +
                          " but " + e.because + " make it " + formatShape(e.shape)};
      if (t.dtype != "F32")
        widest = t.dtype;
      used.insert(name);
    }
  }
  std::vector<std::string> unused;
  for (const auto &[name, t] : stored) {
    if (used.count(name))
      continue;
    bool known = false;
    for (const std::string &pattern : spec.ignorable)
      for (int64_t l = 0; l < std::max<int64_t>(spec.layers, 1) && !known; ++l)
        known = atLayer(pattern, l) == name;
    if (!known)
      unused.push_back(name);
  }
  return unused;
}

int importFolder() {
  const std::string folder = folderArg;
  SmallString<256> configPath(folder);
  sys::path::append(configPath, "config.json");
  auto buffer = MemoryBuffer::getFile(configPath);
  if (!buffer)
    throw ImportError{std::string(configPath) +
                      ": cannot be read (a Hugging Face model folder holds config.json)"};
  Expected<json::Value> parsed = json::parse((*buffer)->getBuffer());
  if (!parsed)
    throw ImportError{std::string(configPath) + ": not JSON (" + toString(parsed.takeError()) +
                      ")"};
  if (!parsed->getAsObject())
    throw ImportError{std::string(configPath) + ": not a JSON object"};
  Config config(std::string(configPath), *parsed->getAsObject());
  const std::string type = config.string("model_type");
  if (type.empty())
    throw ImportError{config.path() + ": 'model_type' is missing"};
  Family family;
  if (type == "gpt2")
    family = Family::Gpt2;
  else if (type == "llama" || type == "mistral" || type == "qwen2" || type == "qwen3")
    family = Family::Llama;
  else
    throw ImportError{config.path() + ": model_type \"" + type +
                      "\" is not imported (gpt2, llama, mistral, qwen2 and qwen3 are)"};
  std::string architecture;
  if (const json::Array *archs = config.object().getArray("architectures"))
    if (!archs->empty() && (*archs)[0].getAsString())
      architecture = (*archs)[0].getAsString()->str();
  if (!architecture.empty() && !StringRef(architecture).ends_with("ForCausalLM") &&
      !StringRef(architecture).ends_with("LMHeadModel") && architecture != "GPT2Model")
    throw ImportError{config.path() + ": 'architectures' names " + architecture +
                      "; a causal language model (…ForCausalLM, GPT2LMHeadModel) is imported"};

  std::map<std::string, StoredTensor> stored = readFolderTensors(folder);
  Spec spec;
  std::map<std::string, int64_t> dims;
  std::string forward;
  if (family == Family::Gpt2)
    writeGpt2(config, stored, spec, dims, forward);
  else
    writeLlama(config, type, spec, dims, forward);

  std::string widest = "F32";
  std::vector<std::string> unused = checkTensors(spec, stored, folder, widest);

  int64_t seq = seqArg;
  if (seq == 0)
    seq = spec.contextLength > 0 ? std::min<int64_t>(spec.contextLength, 1024) : 1024;
  if (seq < 1)
    throw ImportError{"--seq " + std::to_string(seq) + ": a sequence holds at least one token"};
  if (spec.contextLength > 0 && seq > spec.contextLength)
    throw ImportError{"--seq " + std::to_string(seq) + " is longer than the " +
                      std::to_string(spec.contextLength) + " positions " + type +
                      (family == Family::Gpt2 ? " has weights for (n_positions)"
                                              : " was trained for (max_position_embeddings)")};
  const int64_t batch = batchArg, micro = microBatchArg ? microBatchArg : batchArg;
  if (batch < 1 || micro < 1 || batch % micro != 0)
    throw ImportError{"--batch " + std::to_string(batch) + " --micro-batch " +
                      std::to_string(micro) + ": the micro-batch must divide the batch"};
  std::string precision = precisionArg;
  if (precision.empty())
    precision = widest == "F32" ? "fp32" : "bf16";
  if (precision != "fp32" && precision != "bf16")
    throw ImportError{"--precision " + precision + ": fp32 or bf16"};
  const int64_t steps = stepsArg;
  if (steps < 1)
    throw ImportError{"--steps must be at least 1"};

  std::string name = nameArg.empty() ? identifier(sys::path::stem(outputArg.getValue()))
                                      : std::string(nameArg);
  if (identifier(name) != name)
    throw ImportError{"--name " + name + ": a model's name is letters, digits and '_'"};

  std::string out;
  out += "# " + name + ": the Hugging Face model in " + folder + " (" + type +
         (architecture.empty() ? "" : ", " + architecture) + "), written by tessel import-hf.\n";
  out += "#\n";
  out += "# Every parameter starts from the folder's weights: load(\"name\") names the stored\n";
  out += "# tensor, {layer} the repeated layer's index (docs/pretrained.md). A parameter keeps\n";
  out += "# the stored tensor's dim order (a Linear's weight is [out, in]); `@` contracts the\n";
  out += "# dims two tensors share by name, so that order changes nothing else. The weights fix\n";
  out += "# every dim but seq (and batch). --init-from DIR starts from another folder or from a\n";
  out += "# checkpoint.\n\n";
  out += spec.blocks + "\n";
  out += "model " + name + " {\n  dims {\n";
  out += "    seq = " + std::to_string(seq);
  if (spec.contextLength > 0)
    out += "                 # of the " + std::to_string(spec.contextLength) +
           " positions the weights know";
  out += "\n";
  const char *order[] = {"vocab", "embed", "heads", "kv_heads", "head", "ffn"};
  for (const char *d : order)
    if (dims.count(d))
      out += std::string("    ") + d + " = " + std::to_string(dims[d]) + "\n";
  out += "  }\n";
  out += "  layers = " + std::to_string(spec.layers) + "\n\n";
  out += "  forward(tokens: i32[batch, seq], targets: i32[batch, seq]) -> loss {\n";
  out += forward;
  out += "  }\n}\n\n";
  out += "# One rank. Over several, e.g. four:\n";
  out += "#   mesh { dp = 2, tp = 2 }\n";
  out += std::string("#   shard { batch = dp, heads = tp, ") +
         (dims.count("kv_heads") ? "kv_heads = tp, " : "") + "ffn = tp }\n";
  out += "# (tp must divide heads" + std::string(dims.count("kv_heads") ? ", kv_heads" : "") +
         " and ffn; `tessel estimate` shows each layout's memory.)\n";
  out += "parallel {\n  mesh { dp = 1 }\n  shard { batch = dp }\n}\n\n";
  const int64_t warmup = std::min<int64_t>(100, steps / 10);
  out += "train {\n";
  out += "  batch = " + std::to_string(batch) + "\n";
  out += "  micro_batch = " + std::to_string(micro) + "\n";
  out += "  steps = " + std::to_string(steps) + "\n";
  out += "  # Fine-tuning: a small learning rate, decaying linearly to zero; weight decay on\n";
  out += "  # the matrices only.\n";
  out += "  optimizer = adamw(lr = 2e-5, betas = (0.9, 0.999), eps = 1e-8, weight_decay = 0.0)\n";
  out += "  schedule = linear(warmup = " + std::to_string(warmup) + ", min_lr = 0)\n";
  out += "  clip = 1.0\n";
  out += "  precision = " + precision + "\n";
  out += "  data = \"" + dataArg.getValue() + "\"   # token files: tessel tokenize writes them\n";
  out += "  tokenizer = tokens\n";
  out += "  init_from = \"" + folder + "\"\n";
  out += "  seed = 1337\n";
  out += "  log_every = 10\n";
  out += "}\n";

  std::error_code ec;
  raw_fd_ostream file(outputArg, ec);
  if (ec)
    throw ImportError{outputArg + ": cannot be written (" + ec.message() + ")"};
  file << out;
  file.close();
  if (file.has_error())
    throw ImportError{outputArg + ": cannot be written"};

  int64_t params = 0;
  for (const auto &[n, t] : stored)
    if (std::find(unused.begin(), unused.end(), n) == unused.end()) {
      int64_t count = 1;
      for (int64_t d : t.shape)
        count *= d;
      params += count;
    }
  outs() << "wrote " << outputArg << ": " << type << ", " << spec.layers << " layers, "
         << format("%.1f", static_cast<double>(params) / 1e6) << "M parameters from " << folder
         << " (" << widest << ")\n";
  if (!unused.empty()) {
    outs() << "note: " << unused.size() << " stored tensor" << (unused.size() > 1 ? "s" : "")
           << " not imported: ";
    for (size_t i = 0; i < unused.size() && i < 3; ++i)
      outs() << (i ? ", " : "") << "'" << unused[i] << "'";
    outs() << (unused.size() > 3 ? ", ..." : "") << "\n";
  }
  return 0;
}

} // namespace

bool importHfRequested() { return static_cast<bool>(importCommand); }

int runImportHf() {
  try {
    return importFolder();
  } catch (const ImportError &e) {
    errs() << "tessel: error: " << e.message << "\n";
    return 1;
  }
}

} // namespace tessel
