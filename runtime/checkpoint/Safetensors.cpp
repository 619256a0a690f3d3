//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//

#include "runtime/checkpoint/Safetensors.h"

#include "common/support/Float16.h"
#include "runtime/support/AtomicFile.h"
#include "runtime/support/Json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tessel::rt {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::U8:
    return "U8";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  }
  return "?";
}

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::U8:
    return 1;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 0;
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType dtype : {DType::F32, DType::I32, DType::I64, DType::U8, DType::BF16, DType::F16})
    if (name == dtypeName(dtype))
      return dtype;
  return std::nullopt;
}

void widenToF32(DType dtype, const uint8_t *from, int64_t n, float *to) {
  if (dtype == DType::F32) {
    std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = static_cast<uint16_t>(from[2 * i] | from[2 * i + 1] << 8);
    to[i] = dtype == DType::BF16 ? bf16ToFloat(h) : halfToFloat(h);
  }
}

int64_t shapeElements(const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return -1;
    if (dim != 0 && elements > INT64_MAX / dim)
      return -1;
    elements *= dim;
  }
  return elements;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

/// Bytes of a tensor, or -1 when the shape is invalid or the size overflows.
static int64_t tensorBytes(DType dtype, const std::vector<int64_t> &shape) {
  int64_t elements = shapeElements(shape);
  if (elements < 0 || elements > INT64_MAX / dtypeSize(dtype))
    return -1;
  return elements * dtypeSize(dtype);
}

SafetensorsFile::~SafetensorsFile() {
  if (map)
    ::munmap(map, mapBytes);
}

const SafetensorsTensor *SafetensorsFile::find(const std::string &name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

bool writeSafetensors(const std::string &path, const std::vector<TensorView> &tensors,
                      const std::map<std::string, std::string> &metadata, std::string &error) {
  std::vector<const TensorView *> sorted;
  std::vector<int64_t> sizes;
  std::set<std::string> names;
  for (const TensorView &tensor : tensors) {
    auto refuse = [&](const std::string &why) {
      error = "cannot write " + path + ": tensor '" + tensor.name + "' " + why;
      return false;
    };
    if (tensor.name.empty())
      return refuse("has an empty name");
    if (tensor.name == "__metadata__")
      return refuse("has a reserved name");
    if (!names.insert(tensor.name).second)
      return refuse("appears twice");
    if (tensorBytes(tensor.dtype, tensor.shape) < 0)
      return refuse("has an invalid shape " + formatShape(tensor.shape));
    if (!tensor.data && tensorBytes(tensor.dtype, tensor.shape) > 0)
      return refuse("has no data");
    sorted.push_back(&tensor);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorView *a, const TensorView *b) { return a->name < b->name; });

  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto &[key, value] : metadata)
      meta.set(key, value);
    header.set("__metadata__", std::move(meta));
  }
  int64_t offset = 0;
  for (const TensorView *tensor : sorted) {
    int64_t bytes = tensorBytes(tensor->dtype, tensor->shape);
    Json shape = Json::array();
    for (int64_t dim : tensor->shape)
      shape.push(dim);
    Json entry = Json::object();
    entry.set("dtype", dtypeName(tensor->dtype));
    entry.set("shape", std::move(shape));
    entry.set("data_offsets", Json(Json::Array{offset, offset + bytes}));
    header.set(tensor->name, std::move(entry));
    offset += bytes;
  }
  std::string text = header.compact();
  text.append((8 - text.size() % 8) % 8, ' ');

  return writeFileAtomically(
      path,
      [&](int fd, std::string &reason) {
        uint8_t length[8];
        for (int i = 0; i < 8; ++i)
          length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
        if (!writeAll(fd, length, sizeof length, reason) ||
            !writeAll(fd, text.data(), text.size(), reason))
          return false;
        for (const TensorView *tensor : sorted)
          if (!writeAll(fd, tensor->data, tensorBytes(tensor->dtype, tensor->shape), reason))
            return false;
        return true;
      },
      error);
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// The upstream reader's limit: a larger header is corruption, not a model.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct Entry {
  std::string name;
  int64_t begin, end;
};

class Reader {
public:
  explicit Reader(const std::string &path) : path_(path) {}

  std::unique_ptr<SafetensorsFile> read(std::string &error) {
    auto file = readImpl();
    if (!file)
      error = error_;
    return file;
  }

private:
  std::nullptr_t fail(const std::string &why) {
    error_ = path_ + ": " + why;
    return nullptr;
  }

  bool refuse(const std::string &why) {
    fail(why);
    return false;
  }

  bool readAt(int fd, void *buffer, uint64_t size, uint64_t offset) {
    auto *bytes = static_cast<char *>(buffer);
    while (size > 0) {
      ssize_t got = ::pread(fd, bytes, size, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        return refuse(std::string("cannot read: ") +
                      (got < 0 ? std::strerror(errno) : "unexpected end of file"));
      }
      bytes += got;
      size -= static_cast<uint64_t>(got);
      offset += static_cast<uint64_t>(got);
    }
    return true;
  }

  /// Reads `name`'s entry from the header into `file` and `entries`.
  bool readEntry(const std::string &name, const Json &value, SafetensorsFile &file,
                 std::vector<Entry> &entries) {
    std::string where = "tensor '" + name + "'";
    if (!value.isObject())
      return refuse(where + " is not a JSON object");
    for (const auto &member : value.members())
      if (member.first != "dtype" && member.first != "shape" && member.first != "data_offsets")
        return refuse(where + " has an unexpected field '" + member.first + "'");
    for (const char *field : {"dtype", "shape", "data_offsets"})
      if (!value.find(field))
        return refuse(where + " lacks '" + field + "'");
    const Json *dtypeJson = value.find("dtype");
    const Json *shapeJson = value.find("shape");
    const Json *offsetsJson = value.find("data_offsets");
    if (!dtypeJson->isString())
      return refuse(where + " has a dtype that is not a string");
    std::optional<DType> dtype = parseDType(dtypeJson->asString());
    if (!dtype)
      return refuse(where + " has unknown dtype '" + dtypeJson->asString() +
                    "' (supported: F32, I32, I64, U8, BF16, F16)");
    SafetensorsTensor tensor;
    tensor.dtype = *dtype;
    if (!shapeJson->isArray())
      return refuse(where + " has a shape that is not an array");
    for (const Json &dim : shapeJson->items()) {
      if (!dim.isInteger() || dim.asInt() < 0)
        return refuse(where + " has a shape that is not a list of non-negative integers");
      tensor.shape.push_back(dim.asInt());
    }
    int64_t bytes = tensorBytes(tensor.dtype, tensor.shape);
    if (bytes < 0)
      return refuse(where + " has a shape " + formatShape(tensor.shape) + " too large to hold");
    if (!offsetsJson->isArray() || offsetsJson->size() != 2 ||
        !offsetsJson->items()[0].isInteger() || !offsetsJson->items()[1].isInteger() ||
        offsetsJson->items()[0].asInt() < 0 || offsetsJson->items()[1].asInt() < 0)
      return refuse(where + " has data_offsets that are not two non-negative integers");
    int64_t begin = offsetsJson->items()[0].asInt();
    int64_t end = offsetsJson->items()[1].asInt();
    std::string range = "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
    if (end < begin)
      return refuse(where + " has " + range + " that end before they begin");
    if (end - begin != bytes)
      return refuse(where + " has " + range + " (" + std::to_string(end - begin) + " bytes) but " +
                    dtypeName(tensor.dtype) + " " + formatShape(tensor.shape) + " needs " +
                    std::to_string(bytes) + " bytes");
    if (end > dataBytes_)
      return refuse(where + " has " + range + " beyond the " + std::to_string(dataBytes_) +
                    " bytes of data (is the file truncated?)");
    entries.push_back({name, begin, end});
    file.tensors.emplace(name, std::move(tensor));
    return true;
  }

  std::unique_ptr<SafetensorsFile> readImpl() {
    uint64_t fileBytes = 0;
    std::string why;
    int fd = openRegularFile(path_, UINT64_MAX, fileBytes, why);
    if (fd < 0) {
      error_ = why; // it names the path
      return nullptr;
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    if (fileBytes < 8)
      return fail("truncated: " + std::to_string(fileBytes) +
                  " bytes, too short for the 8-byte header length");
    uint8_t lengthBytes[8];
    if (!readAt(fd, lengthBytes, 8, 0))
      return nullptr;
    uint64_t headerBytes = 0;
    for (int i = 0; i < 8; ++i)
      headerBytes |= static_cast<uint64_t>(lengthBytes[i]) << (8 * i);
    if (headerBytes > fileBytes - 8)
      return fail("header length " + std::to_string(headerBytes) + " runs past the end of the " +
                  std::to_string(fileBytes) + "-byte file (truncated or not safetensors)");
    if (headerBytes > kMaxHeaderBytes)
      return fail("header length " + std::to_string(headerBytes) + " is over the 100 MB limit");
    std::string text(headerBytes, '\0');
    if (!readAt(fd, text.data(), headerBytes, 8))
      return nullptr;
    dataBytes_ = static_cast<int64_t>(fileBytes - 8 - headerBytes);

    std::string jsonError;
    std::optional<Json> header = Json::parse(text, path_ + ": invalid JSON header", jsonError);
    if (!header) {
      error_ = jsonError;
      return nullptr;
    }
    if (!header->isObject())
      return fail("the header is not a JSON object");

    auto file = std::make_unique<SafetensorsFile>();
    file->path = path_;
    std::vector<Entry> entries;
    for (const auto &[name, value] : header->members()) {
      if (name == "__metadata__") {
        if (!value.isObject())
          return fail("__metadata__ is not a JSON object");
        for (const auto &[key, item] : value.members()) {
          if (!item.isString())
            return fail("__metadata__ entry '" + key + "' is not a string");
          file->metadata[key] = item.asString();
        }
        continue;
      }
      if (!readEntry(name, value, *file, entries))
        return nullptr;
    }

    // The tensors must tile the data exactly: no overlaps, no gaps, nothing after the last.
    std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    int64_t covered = 0;
    const Entry *previous = nullptr;
    for (const Entry &entry : entries) {
      if (entry.begin < covered)
        return fail("tensors '" + previous->name + "' and '" + entry.name + "' overlap");
      if (entry.begin > covered)
        return fail("bytes " + std::to_string(covered) + ".." + std::to_string(entry.begin) +
                    " of the data before tensor '" + entry.name + "' belong to no tensor");
      covered = entry.end;
      previous = &entry;
    }
    if (covered != dataBytes_)
      return fail(std::to_string(dataBytes_ - covered) +
                  " bytes of trailing data after the last tensor");

    if (dataBytes_ > 0) {
      void *map = ::mmap(nullptr, static_cast<size_t>(fileBytes), PROT_READ,
                         MAP_PRIVATE | MAP_NORESERVE, fd, 0);
      if (map == MAP_FAILED)
        return fail(std::string("cannot map: ") + std::strerror(errno));
      file->map = map;
      file->mapBytes = static_cast<size_t>(fileBytes);
    }
    // Without data nothing is mapped, and every tensor is empty.
    const auto *data =
        file->map ? static_cast<const uint8_t *>(file->map) + 8 + headerBytes : nullptr;
    for (const Entry &entry : entries)
      file->tensors[entry.name].bytes = ByteSpan(
          entry.end > entry.begin ? data + entry.begin : nullptr,
          static_cast<size_t>(entry.end - entry.begin));
    return file;
  }

  std::string path_;
  std::string error_;
  int64_t dataBytes_ = 0;
};

} // namespace

std::unique_ptr<SafetensorsFile> readSafetensors(const std::string &path, std::string &error) {
  return Reader(path).read(error);
}

} // namespace tessel::rt
