//===- ImportHf.cpp - tessel import-hf ------------------------------------===//
//
// Reads a Hugging Face model folder and writes a `.model` spec of its architecture. The spec
// is ordinary Tessel: blocks over named dims, each parameter declared in the dim order of the
// tensor it loads (`load("model.layers.{layer}.mlp.up_proj.weight")`), so that the runtime
// reads the weights without transposing anything, and a `parallel` and a `train` section the
// user edits. Everything config.json says that the spec cannot express (an activation, a
// rope scaling, biases where the architecture has none) is refused by name, and every tensor
// the spec loads is checked against the folder — present, a float, of the shape config.json
// implies — before the spec is written. This file is the command; ImportHfArchitectures.cpp
// writes each family's blocks and ImportHfTensors.cpp reads the folder's tensors.
//
//===----------------------------------------------------------------------===//

#include "ImportHf.h"
#include "ImportHfImpl.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace tessel {
namespace {

using namespace importhf;

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

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

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
