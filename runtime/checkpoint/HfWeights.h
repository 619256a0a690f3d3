//===- HfWeights.h - The weights of a Hugging Face model folder -*- C++ -*-===//
//
// A run may start from pretrained weights (`--init-from DIR`, or the spec's `train.init_from`):
// each parameter the spec initialises with `load("name")` is the stored tensor of that name,
// whole or one of several equal pieces of it. The weights are a Hugging Face model folder —
// `model.safetensors`, or `model.safetensors.index.json` and the shards its `weight_map`
// names — or one `.safetensors` file. Tensors are read widened to F32 from F32, BF16 or F16.
//
// A parameter takes the stored tensor's elements in their order, so its dims need not be the
// stored tensor's, but they must split or merge the same ones: [heads, head, embed] reads a
// stored [heads * head, embed]; [embed, ffn] never reads a stored [ffn, embed] although the two
// hold as many elements (that would be a transpose, which the spec writes as its dims' order).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CHECKPOINT_HFWEIGHTS_H
#define TESSEL_RUNTIME_CHECKPOINT_HFWEIGHTS_H

#include "runtime/checkpoint/Safetensors.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace tessel::rt {

/// Which piece of a stored tensor a parameter is: of the first `rows` entries of its first dim
/// (-1: all; a position table longer than the sequence), piece `part` of `parts` equal pieces
/// along `axis` (negative: from the last; parts == 1: all of them).
struct StoredSlice {
  int64_t part = 0, parts = 1, axis = -1, rows = -1;
};

/// Where a piece lies in its stored tensor: `outer` runs of `inner` contiguous elements, run o
/// starting at element o * stride + first; `shape` is the piece's.
struct PieceLayout {
  int64_t outer = 1, inner = 1, stride = 1, first = 0;
  std::vector<int64_t> shape;
};

/// The layout of `slice` in a stored tensor of `stored` dims; false, with why, when the slice
/// does not fit it (too many rows, an axis it lacks, a dim that does not cut evenly).
bool pieceLayout(const std::vector<int64_t> &stored, const StoredSlice &slice, PieceLayout &out,
                 std::string &why);

class HfWeights {
public:
  /// Whether `path` looks like Hugging Face weights rather than a Tessel checkpoint: a
  /// `.safetensors` file, or a folder holding `model.safetensors` or its index.
  static bool looksLike(const std::string &path);
  /// Opens the weights at `path` and validates what it reads: the index (its weight_map
  /// names existing files that hold the tensors it promises) and each file's header. Errors
  /// name the file and what is wrong.
  static std::unique_ptr<HfWeights> open(const std::string &path, std::string &error);

  const std::string &path() const { return path_; }
  /// The folder (empty when the weights are one .safetensors file).
  const std::string &folder() const { return folder_; }
  /// The stored tensor of exactly this name, or null.
  const SafetensorsTensor *tensor(const std::string &name) const;
  /// Every stored tensor's name, sorted.
  std::vector<std::string> names() const;

  /// The stored name that `name` refers to: `name` itself or, when absent, the one stored
  /// name that differs from it by a leading component (`transformer.h.0.ln_1.weight` for
  /// `h.0.ln_1.weight` and the reverse: Hugging Face saves a model with or without its base
  /// model's prefix). Empty when there is none or several.
  std::string resolve(const std::string &name) const;

  /// Reads the stored tensor `source` (or its `slice`) widened to F32 into `out`, as the
  /// whole parameter `param` of shape `shape`. Fails, naming the parameter and the tensor, when
  /// the tensor is absent, not a float, not cut evenly, or its dims do not match `shape`.
  bool read(const std::string &param, const std::vector<int64_t> &shape,
            const std::string &source, const StoredSlice &slice, std::vector<float> &out,
            std::string &error) const;

private:
  const SafetensorsFile *fileOf(const std::string &name, std::string &error) const;

  std::string path_;
  /// Stored name -> the file holding it (relative to the folder).
  std::map<std::string, std::string> where_;
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
  std::string folder_;
};

/// Whether a tensor of `stored` dims may be read as one of `wanted` dims: the same number of
/// elements, and walking both in order, each run of dims that multiplies to the same size is
/// one dim on at least one side (split or merged, never reordered). Size-1 dims are ignored.
bool reshapeCompatible(const std::vector<int64_t> &stored, const std::vector<int64_t> &wanted);

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CHECKPOINT_HFWEIGHTS_H
