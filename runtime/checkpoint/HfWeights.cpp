//===- HfWeights.cpp - The weights of a Hugging Face model folder ---------===//

#include "runtime/checkpoint/HfWeights.h"

#include "runtime/support/Json.h"

#include <cstring>
#include <filesystem>

namespace tessel::rt {

namespace fs = std::filesystem;

namespace {

constexpr const char *kSingleFile = "model.safetensors";
constexpr const char *kIndexFile = "model.safetensors.index.json";
/// An index lists names and file names: a few MB for the largest published models.
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string joinPath(const std::string &folder, const std::string &file) {
  return folder.empty() ? file : (fs::path(folder) / file).string();
}

} // namespace

bool reshapeCompatible(const std::vector<int64_t> &stored, const std::vector<int64_t> &wanted) {
  std::vector<int64_t> a, b;
  for (int64_t d : stored)
    if (d != 1)
      a.push_back(d);
  for (int64_t d : wanted)
    if (d != 1)
      b.push_back(d);
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    // One group: the shortest runs from i and from j with equal products.
    size_t i0 = i, j0 = j;
    int64_t pa = a[i++], pb = b[j++];
    while (pa != pb) {
      if (pa < pb) {
        if (i == a.size())
          return false;
        pa *= a[i++];
      } else {
        if (j == b.size())
          return false;
        pb *= b[j++];
      }
    }
    // Split or merged, not reordered: one side of the group is a single dim.
    if (i - i0 > 1 && j - j0 > 1)
      return false;
  }
  return i == a.size() && j == b.size();
}

bool pieceLayout(const std::vector<int64_t> &stored, const StoredSlice &slice, PieceLayout &out,
                 std::string &why) {
  // The stored dims with the first cut to `rows` (a prefix of the data), then the cut one
  // divided into `parts`.
  std::vector<int64_t> view = stored;
  const int64_t rank = static_cast<int64_t>(view.size());
  if (slice.rows >= 0) {
    if (rank == 0 || slice.rows < 1 || slice.rows > view[0]) {
      why = "the first " + std::to_string(slice.rows) + " rows";
      return false;
    }
    view[0] = slice.rows;
  }
  out.shape = view;
  int64_t axis = slice.axis < 0 ? rank + slice.axis : slice.axis;
  if (slice.parts > 1 || slice.part != 0) {
    if (axis < 0 || axis >= rank) {
      why = "a piece along axis " + std::to_string(slice.axis);
      return false;
    }
    if (slice.parts < 1 || slice.part < 0 || slice.part >= slice.parts ||
        view[axis] % slice.parts != 0) {
      why = "part " + std::to_string(slice.part) + " of " + std::to_string(slice.parts) +
            " along dim " + std::to_string(axis) + ", which does not cut into that many equal "
            "parts,";
      return false;
    }
    out.shape[axis] /= slice.parts;
  } else {
    axis = 0;
  }
  out.outer = 1;
  out.inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    out.outer *= view[d];
  for (int64_t d = axis; d < rank; ++d)
    out.inner *= out.shape[d];
  out.stride = out.inner * (slice.parts > 1 ? slice.parts : 1);
  out.first = out.inner * slice.part;
  return true;
}

bool HfWeights::looksLike(const std::string &path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec))
    return endsWith(path, ".safetensors");
  return fs::exists(fs::path(path) / kSingleFile, ec) ||
         fs::exists(fs::path(path) / kIndexFile, ec);
}

std::unique_ptr<HfWeights> HfWeights::open(const std::string &path, std::string &error) {
  auto w = std::unique_ptr<HfWeights>(new HfWeights());
  w->path_ = path;
  std::error_code ec;
  std::vector<std::string> files;
  bool indexed = false;
  if (fs::is_regular_file(path, ec)) {
    if (!endsWith(path, ".safetensors")) {
      error = path + ": not a .safetensors file, a Hugging Face model folder or a checkpoint";
      return nullptr;
    }
    w->folder_ = "";
    files.push_back(path);
  } else if (!fs::is_directory(path, ec)) {
    error = path + ": no such file or directory";
    return nullptr;
  } else {
    w->folder_ = path;
    const std::string index = joinPath(path, kIndexFile);
    if (fs::exists(index, ec)) {
      indexed = true;
      auto json = readJsonFile(index, kMaxIndexBytes, error);
      if (!json)
        return nullptr;
      const Json *map = json->find("weight_map");
      if (!map || !map->isObject() || map->size() == 0) {
        error = index + ": no \"weight_map\" object naming the file of each tensor";
        return nullptr;
      }
      std::set<std::string> named;
      for (const auto &[name, file] : map->members()) {
        if (!file.isString() || file.asString().empty() ||
            file.asString().find('/') != std::string::npos ||
            file.asString().find("..") != std::string::npos) {
          error = index + ": \"weight_map\" gives '" + name +
                  "' no file name of this folder";
          return nullptr;
        }
        w->where_[name] = file.asString();
        if (named.insert(file.asString()).second)
          files.push_back(joinPath(path, file.asString()));
      }
    } else if (fs::exists(joinPath(path, kSingleFile), ec)) {
      files.push_back(joinPath(path, kSingleFile));
    } else {
      error = path + ": neither " + kSingleFile + " nor " + kIndexFile +
              " (a Hugging Face model folder holds one of them)";
      return nullptr;
    }
  }
  // Every file is mapped and its header validated now, so that a corrupt shard is refused
  // before any weight is read.
  for (const std::string &file : files) {
    auto f = readSafetensors(file, error);
    if (!f)
      return nullptr;
    const std::string key = w->folder_.empty() ? file : fs::path(file).filename().string();
    if (!indexed)
      for (const auto &[name, tensor] : f->tensors)
        w->where_[name] = key;
    w->files_[key] = std::move(f);
  }
  // An index's promises are kept: each tensor is in the file it names.
  for (const auto &[name, file] : w->where_) {
    auto it = w->files_.find(file);
    if (it == w->files_.end() || !it->second->find(name)) {
      error = joinPath(w->folder_, kIndexFile) + ": '" + name + "' is not in " +
              joinPath(w->folder_, file);
      return nullptr;
    }
  }
  return w;
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto &[name, file] : where_)
    out.push_back(name);
  return out;
}

std::string HfWeights::resolve(const std::string &name) const {
  if (where_.count(name))
    return name;
  std::string found;
  int matches = 0;
  // A leading component removed from the stored name...
  for (const auto &[stored, file] : where_) {
    size_t dot = stored.find('.');
    if (dot != std::string::npos && stored.compare(dot + 1, std::string::npos, name) == 0) {
      found = stored;
      ++matches;
    }
  }
  // ... or from the name asked for.
  size_t dot = name.find('.');
  if (dot != std::string::npos && where_.count(name.substr(dot + 1))) {
    found = name.substr(dot + 1);
    ++matches;
  }
  return matches == 1 ? found : std::string();
}

const SafetensorsTensor *HfWeights::tensor(const std::string &name) const {
  std::string ignored;
  const SafetensorsFile *file = fileOf(name, ignored);
  return file ? file->find(name) : nullptr;
}

const SafetensorsFile *HfWeights::fileOf(const std::string &name, std::string &error) const {
  auto it = where_.find(name);
  if (it == where_.end())
    return nullptr;
  auto f = files_.find(it->second);
  if (f == files_.end()) {
    error = path_ + ": the file of '" + name + "' is not open";
    return nullptr;
  }
  return f->second.get();
}

bool HfWeights::read(const std::string &param, const std::vector<int64_t> &shape,
                     const std::string &source, const StoredSlice &slice,
                     std::vector<float> &out, std::string &error) const {
  const std::string name = resolve(source);
  if (name.empty()) {
    error = "parameter '" + param + "' loads '" + source + "', which " + path_ + " does not hold";
    // The nearest stored names help with a typo or another naming scheme.
    size_t cut = source.rfind('.');
    cut = cut == std::string::npos || cut == 0 ? std::string::npos : source.rfind('.', cut - 1);
    std::string last = cut == std::string::npos ? source : source.substr(cut);
    int shown = 0;
    for (const auto &[stored, file] : where_)
      if (endsWith(stored, last) && shown < 3) {
        error += shown++ ? ", '" + stored + "'" : " (it holds '" + stored + "'";
      }
    if (shown)
      error += ", ...)";
    return false;
  }
  const SafetensorsFile *file = fileOf(name, error);
  if (!file)
    return false;
  const SafetensorsTensor *t = file->find(name);
  const std::string where = "'" + name + "' (" + file->path + ")";
  if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16) {
    error = "parameter '" + param + "' loads " + where + ", which is " + dtypeName(t->dtype) +
            ": weights are F32, BF16 or F16";
    return false;
  }
  PieceLayout layout;
  std::string why;
  if (!pieceLayout(t->shape, slice, layout, why)) {
    error = "parameter '" + param + "' loads " + why + " of " + where + ", which is " +
            formatShape(t->shape);
    return false;
  }
  if (!reshapeCompatible(layout.shape, shape)) {
    error = "parameter '" + param + "' is " + formatShape(shape) + " but " + where + " is " +
            formatShape(t->shape);
    if (slice.parts > 1 || slice.rows >= 0)
      error += " (of which it reads " + formatShape(layout.shape) + ")";
    if (shapeElements(layout.shape) == shapeElements(shape))
      error += ": as many elements, in another order (write the parameter's dims in the "
               "stored order)";
    return false;
  }
  out.resize(static_cast<size_t>(layout.outer * layout.inner));
  const uint8_t *bytes = t->bytes.data();
  const int64_t elementBytes = dtypeSize(t->dtype);
  for (int64_t o = 0; o < layout.outer; ++o)
    widenToF32(t->dtype, bytes + (o * layout.stride + layout.first) * elementBytes, layout.inner,
               out.data() + o * layout.inner);
  return true;
}

} // namespace tessel::rt
