//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// The safetensors format (huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the tensors' bytes. We write tensors sorted by name,
// contiguous in that order, the header padded with spaces to a multiple of 8. The reader trusts
// nothing: every corruption it can detect is refused with the file's name and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CHECKPOINT_SAFETENSORS_H
#define TESSEL_RUNTIME_CHECKPOINT_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::rt {

/// The element types we store.
enum class DType { F32, I32, I64, U8 };

/// "F32", "I32", "I64", "U8".
const char *dtypeName(DType dtype);
/// Bytes per element.
int64_t dtypeSize(DType dtype);
/// The dtype named `name`, or nullopt.
std::optional<DType> parseDType(std::string_view name);

/// The number of elements of `shape` (1 for a scalar), or -1 when a dim is negative or the
/// product overflows int64.
int64_t shapeElements(const std::vector<int64_t> &shape);
/// "[128, 4, 32]".
std::string formatShape(const std::vector<int64_t> &shape);

/// A tensor to write, borrowed: `data` holds shapeElements(shape) * dtypeSize(dtype) bytes.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// Writes `tensors` and `metadata` to `path` atomically (see AtomicFile.h). Refuses empty,
/// duplicate or reserved ("__metadata__") names, negative dims and null data.
bool writeSafetensors(const std::string &path, const std::vector<TensorView> &tensors,
                      const std::map<std::string, std::string> &metadata, std::string &error);

/// A tensor read from a file; `bytes` holds its elements, little-endian.
struct SafetensorsTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// The contents of a safetensors file.
struct SafetensorsFile {
  std::string path;
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;

  /// The tensor named `name`, or null.
  const SafetensorsTensor *find(const std::string &name) const;
};

/// Reads and validates `path`: a truncated file, a header length beyond the file, invalid
/// JSON, an unknown dtype, malformed shapes, offsets out of range, overlapping, leaving gaps
/// or not matching dtype x shape, trailing bytes after the last tensor and duplicate names are
/// refused with "<path>: <reason>".
std::unique_ptr<SafetensorsFile> readSafetensors(const std::string &path, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CHECKPOINT_SAFETENSORS_H
