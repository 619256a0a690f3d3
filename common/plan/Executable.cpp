//===- Executable.cpp - Plans embedded in executables ---------------------===//

#include "common/plan/Executable.h"

#include <cstring>
#include <fstream>

namespace tessel::planfile {

namespace {
constexpr char kTrailerMagic[8] = {'T', 'E', 'S', 'S', 'E', 'X', 'E', '1'};
constexpr size_t kTrailerBytes = 24;
} // namespace

void appendEmbeddedPlan(std::vector<uint8_t> &exe, const std::vector<uint8_t> &plan) {
  uint64_t offset = exe.size(), size = plan.size();
  exe.reserve(exe.size() + plan.size() + 24); // One allocation, even for a plan of gigabytes.
  exe.insert(exe.end(), plan.begin(), plan.end());
  const uint8_t *o = reinterpret_cast<const uint8_t *>(&offset);
  const uint8_t *s = reinterpret_cast<const uint8_t *>(&size);
  exe.insert(exe.end(), o, o + 8);
  exe.insert(exe.end(), s, s + 8);
  exe.insert(exe.end(), kTrailerMagic, kTrailerMagic + 8);
}

bool readEmbeddedPlan(const std::string &path, std::vector<uint8_t> &plan, bool &found,
                      std::string &error) {
  found = false;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    error = "cannot open '" + path + "'";
    return false;
  }
  uint64_t fileSize = static_cast<uint64_t>(in.tellg());
  if (fileSize < kTrailerBytes)
    return true;
  char trailer[kTrailerBytes];
  in.seekg(static_cast<std::streamoff>(fileSize - kTrailerBytes));
  if (!in.read(trailer, kTrailerBytes)) {
    error = "cannot read the end of '" + path + "'";
    return false;
  }
  if (std::memcmp(trailer + 16, kTrailerMagic, 8) != 0)
    return true;
  found = true;
  uint64_t offset, size;
  std::memcpy(&offset, trailer, 8);
  std::memcpy(&size, trailer + 8, 8);
  if (offset > fileSize - kTrailerBytes || size != fileSize - kTrailerBytes - offset) {
    error = "the plan embedded in '" + path + "' has a damaged trailer";
    return false;
  }
  plan.resize(size);
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(reinterpret_cast<char *>(plan.data()), static_cast<std::streamsize>(size))) {
    error = "cannot read the plan embedded in '" + path + "'";
    return false;
  }
  return true;
}

} // namespace tessel::planfile
