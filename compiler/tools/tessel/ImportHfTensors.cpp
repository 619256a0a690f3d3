//===- ImportHfTensors.cpp - The tensors a Hugging Face folder stores -----===//
//
// `tessel import-hf` checks every tensor the spec loads against the folder before writing the
// spec, and reads no weights to do it: the JSON header of each safetensors file gives every
// tensor's name, dtype and shape. A sharded folder's model.safetensors.index.json names the
// shards, and every tensor it maps must be in the shard it names.
//
//===----------------------------------------------------------------------===//

#include "ImportHfImpl.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <fstream>
#include <set>

using namespace llvm;

namespace tessel::importhf {
namespace {

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

} // namespace

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
    const json::Object *map =
        v->getAsObject() ? v->getAsObject()->getObject("weight_map") : nullptr;
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

} // namespace tessel::importhf
