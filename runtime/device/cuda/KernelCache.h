//===- KernelCache.h - Compiled kernels kept on disk -------------*- C++ -*-===//
//
// NVRTC takes a fraction of a second per kernel; a plan has tens of fused bodies and is loaded
// again at every run, so the cubins are kept on disk, one file per key. The key is a hash of
// everything that decides the code (the source, the options, the architecture and the NVRTC
// version), so an entry is never stale: a change to any of them is another key. Each entry
// carries the size and checksum of its cubin; an entry that does not match (a truncated or
// corrupt file) is reported as such and compiled again. Entries are written to a temporary
// file and renamed into place, so ranks that compile the same kernel at once, or a run that
// dies mid-write, leave either no entry or a whole one.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_DEVICE_CUDA_KERNELCACHE_H
#define TESSEL_RUNTIME_DEVICE_CUDA_KERNELCACHE_H

#include <string>
#include <vector>

namespace tessel::rt {

/// Where compiled kernels are kept: $TESSEL_NVRTC_CACHE, else $XDG_CACHE_HOME/tessel/nvrtc,
/// else $HOME/.cache/tessel/nvrtc. Empty (no cache) for TESSEL_NVRTC_CACHE=off or where none
/// of the variables is set.
std::string defaultKernelCacheDir();

/// The key of the code NVRTC makes of `source` with `options` for `arch` (16 hex digits).
std::string kernelCacheKey(const std::string &source, const std::vector<std::string> &options,
                           const std::string &arch, const std::string &nvrtcVersion);

class KernelCache {
public:
  /// A cache in `dir` (created at the first store); an empty `dir` keeps nothing.
  explicit KernelCache(std::string dir) : dir_(std::move(dir)) {}

  enum class Lookup { Hit, Miss, Corrupt };
  /// The cubin stored under `key`: Hit with it in `binary`, Miss where there is none, Corrupt
  /// where the entry is not a whole one (it is then best compiled and stored again).
  Lookup get(const std::string &key, std::string &binary) const;
  /// Stores `binary` under `key`, atomically; false with the reason (the caller carries on
  /// without the cache).
  bool put(const std::string &key, const std::string &binary, std::string &error) const;

  const std::string &dir() const { return dir_; }
  /// The file of `key`'s entry.
  std::string path(const std::string &key) const;

private:
  std::string dir_;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_DEVICE_CUDA_KERNELCACHE_H
