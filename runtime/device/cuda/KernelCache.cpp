//===- KernelCache.cpp - Compiled kernels kept on disk --------------------===//
//
// An entry: "TESSELKC" | u32 format (1) | u32 0 | u64 cubin bytes | u64 FNV-1a of the cubin |
// the cubin, the numbers in the byte order of the host that wrote them (an entry with another
// order reads as corrupt and is compiled again).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/cuda/KernelCache.h"

#include "runtime/support/AtomicFile.h"

#include "common/support/Checksum.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tessel::rt {

namespace {

constexpr char kMagic[8] = {'T', 'E', 'S', 'S', 'E', 'L', 'K', 'C'};
constexpr uint32_t kFormat = 1;
/// The largest cache entry read: far above any fused kernel's cubin.
constexpr uint64_t kMaxCubinBytes = uint64_t(256) << 20;

struct EntryHeader {
  char magic[8];
  uint32_t format;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t checksum;
};
static_assert(sizeof(EntryHeader) == 32);

/// Hashes length-prefixed parts, so that no two lists of parts give the same bytes.
void addPart(uint64_t &h, const std::string &part) {
  const uint64_t size = part.size();
  unsigned char bytes[8];
  std::memcpy(bytes, &size, sizeof bytes);
  for (unsigned char b : bytes)
    h = (h ^ b) * 1099511628211ull;
  for (unsigned char b : part)
    h = (h ^ b) * 1099511628211ull;
}

} // namespace

std::string defaultKernelCacheDir() {
  if (const char *dir = std::getenv("TESSEL_NVRTC_CACHE"); dir && *dir)
    return std::strcmp(dir, "off") == 0 ? std::string() : std::string(dir);
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tessel/nvrtc";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/tessel/nvrtc";
  return "";
}

std::string kernelCacheKey(const std::string &source, const std::vector<std::string> &options,
                           const std::string &arch, const std::string &nvrtcVersion) {
  uint64_t h = 14695981039346656037ull; // FNV-1a's offset basis, as common/support/Checksum.h.
  addPart(h, "tessel-nvrtc-1");
  addPart(h, nvrtcVersion);
  addPart(h, arch);
  addPart(h, std::to_string(options.size()));
  for (const std::string &o : options)
    addPart(h, o);
  addPart(h, source);
  return hex64(h);
}

std::string KernelCache::path(const std::string &key) const { return dir_ + "/" + key + ".cubin"; }

KernelCache::Lookup KernelCache::get(const std::string &key, std::string &binary) const {
  if (dir_.empty())
    return Lookup::Miss;
  std::string bytes, error;
  if (!readWholeFile(path(key), kMaxCubinBytes, bytes, error))
    return Lookup::Miss;
  EntryHeader h;
  if (bytes.size() < sizeof h)
    return Lookup::Corrupt;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.format != kFormat ||
      h.bytes != bytes.size() - sizeof h ||
      fnv1a64(bytes.data() + sizeof h, bytes.size() - sizeof h) != h.checksum)
    return Lookup::Corrupt;
  binary = bytes.substr(sizeof h);
  return Lookup::Hit;
}

bool KernelCache::put(const std::string &key, const std::string &binary, std::string &error) const {
  if (dir_.empty())
    return true;
  if (!prepareOutputDirectory(dir_, "kernel cache directory", error))
    return false;
  EntryHeader h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.format = kFormat;
  h.reserved = 0;
  h.bytes = binary.size();
  h.checksum = fnv1a64(binary.data(), binary.size());
  std::string bytes(reinterpret_cast<const char *>(&h), sizeof h);
  bytes += binary;
  return writeFileAtomically(path(key), bytes, error);
}

} // namespace tessel::rt
