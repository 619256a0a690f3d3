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

/// The element types read and written: F32, I32, I64, U8, and the 16-bit floats BF16 and F16
/// that pretrained weights are usually published in (read into F32 by widening: readBlock).
enum class DType { F32, I32, I64, U8, BF16, F16 };

/// "F32", "I32", "I64", "U8", "BF16", "F16".
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

/// Reads `n` elements of a float tensor stored as `dtype` (F32, BF16 or F16, little-endian) at
/// `from` into `to` as F32: the 16-bit floats widened, which is exact.
void widenToF32(DType dtype, const uint8_t *from, int64_t n, float *to);

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

/// Bytes borrowed from a file's mapping.
class ByteSpan {
public:
  ByteSpan() = default;
  ByteSpan(const uint8_t *data, size_t size) : data_(data), size_(size) {}
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint8_t *begin() const { return data_; }
  const uint8_t *end() const { return data_ + size_; }

private:
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

/// A tensor read from a file; `bytes` holds its elements, little-endian, in the file's mapping.
struct SafetensorsTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  ByteSpan bytes;
};

/// The contents of a safetensors file, mapped read-only rather than read: a tensor's pages are
/// read from the disk (or found in the page cache) when its bytes are first touched, and are
/// never copied into memory of the process's own.
struct SafetensorsFile {
  SafetensorsFile() = default;
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  std::string path;
  std::map<std::string, SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
  void *map = nullptr; ///< The whole file's mapping, for munmap.
  size_t mapBytes = 0;

  /// The tensor named `name`, or null.
  const SafetensorsTensor *find(const std::string &name) const;
};

/// Maps and validates `path`: a truncated file, a header length beyond the file, invalid
/// JSON, an unknown dtype, malformed shapes, offsets out of range, overlapping, leaving gaps
/// or not matching dtype x shape, trailing bytes after the last tensor and duplicate names are
/// refused with "<path>: <reason>".
std::unique_ptr<SafetensorsFile> readSafetensors(const std::string &path, std::string &error);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CHECKPOINT_SAFETENSORS_H
