//===- FuzzTargets.cpp - What each fuzzer feeds its bytes to --------------===//

#include "test/fuzz/FuzzTargets.h"

#include "common/catalogue/KernelCatalogue.h"
#include "common/cluster/Cluster.h"
#include "common/plan/PlanFile.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/core/Rng.h"
#include "runtime/host/Data.h"
#include "runtime/support/Json.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace tessel::fuzz {

namespace {

/// A property of an accepted input that does not hold: a bug, reported as a crash.
[[noreturn]] void broken(const char *target, const std::string &what) {
  std::fprintf(stderr, "fuzz target %s: %s\n", target, what.c_str());
  std::abort();
}

/// The bytes as a file in memory, for the readers that open a path: "/proc/self/fd/N".
class MemoryFile {
public:
  MemoryFile(const uint8_t *data, size_t size) {
    fd_ = ::memfd_create("tessel-fuzz", MFD_CLOEXEC);
    if (fd_ < 0)
      broken("memory file", "memfd_create failed");
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0)
        broken("memory file", "write failed");
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
  int fd_ = -1;
};

} // namespace

void json(const uint8_t *data, size_t size) {
  std::string error;
  std::optional<rt::Json> value =
      rt::Json::parse(std::string_view(reinterpret_cast<const char *>(data), size), "input", error);
  if (!value)
    return;
  for (const std::string &text : {value->compact(), value->pretty()}) {
    std::optional<rt::Json> again = rt::Json::parse(text, "written", error);
    if (!again || !(*again == *value))
      broken("json", "a parsed document does not read back from its own text: " + error);
  }
}

void safetensors(const uint8_t *data, size_t size) {
  MemoryFile file(data, size);
  std::string error;
  auto read = rt::readSafetensors(file.path(), error);
  if (!read)
    return;
  // Every tensor's bytes lie inside the mapping: touch them all.
  unsigned sum = 0;
  for (const auto &[name, tensor] : read->tensors) {
    if (tensor.bytes.size() !=
        static_cast<size_t>(rt::shapeElements(tensor.shape) * rt::dtypeSize(tensor.dtype)))
      broken("safetensors", "tensor '" + name + "' has bytes of another size than its shape");
    for (uint8_t b : tensor.bytes)
      sum += b;
  }
  (void)sum;
}

void plan(const uint8_t *data, size_t size) {
  planfile::Plan parsed;
  std::string error;
  if (!planfile::parsePlan(data, size, parsed, error))
    return;
  const std::vector<uint8_t> written = planfile::serializePlan(parsed);
  planfile::Plan again;
  if (!planfile::parsePlan(written.data(), written.size(), again, error))
    broken("plan", "a parsed plan does not read back from its own bytes: " + error);
  if (planfile::serializePlan(again) != written)
    broken("plan", "a plan read back from its own bytes writes other bytes");
}

void cluster(const uint8_t *data, size_t size) {
  cluster::Cluster parsed;
  std::string error;
  if (!cluster::parseCluster(std::string(reinterpret_cast<const char *>(data), size),
                             "input.cluster", parsed, error))
    return;
  const std::string written = cluster::formatCluster(parsed, "");
  cluster::Cluster again;
  if (!cluster::parseCluster(written, "written.cluster", again, error))
    broken("cluster", "a parsed cluster does not read back from its own text: " + error);
  if (cluster::formatCluster(again, "") != written)
    broken("cluster", "a cluster read back from its own text writes other text");
}

void tokens(const uint8_t *data, size_t size) {
  MemoryFile file(data, size);
  std::string error;
  constexpr int64_t kWindow = 5, kVocab = 128256;
  auto read = rt::TokenData::open(file.path(), rt::Tokenizer::Tokens, kVocab, 0.25, kWindow,
                                  error);
  if (!read)
    return;
  // A few batches of each split: stream windows, or example rows with their masks.
  rt::Rng rng(7);
  constexpr int64_t kRows = 2, kSeq = kWindow - 1;
  const std::vector<bool> taken(kRows, true);
  int32_t tokens[kRows * kSeq], targets[kRows * kSeq];
  for (int i = 0; i < 2; ++i) {
    int64_t counted = 0;
    if (!read->trainBatch(rng, taken, tokens, targets, kSeq, error, &counted))
      return; // An id past the vocabulary, found as it is read.
    if (counted < 0 || counted > kRows * kSeq)
      broken("tokens", "a training batch counts " + std::to_string(counted) + " targets");
    if (read->hasEval() &&
        !read->evalBatch(i * kRows, 2 * kRows, taken, tokens, targets, kSeq, error, &counted))
      return;
  }
}

void elementwiseBody(const uint8_t *data, size_t size) {
  catalogue::ElementwiseBody body;
  std::string error;
  if (!catalogue::parseElementwiseBody(
          std::string_view(reinterpret_cast<const char *>(data), size), body, error))
    return;
  const std::string written = catalogue::formatElementwiseBody(body);
  catalogue::ElementwiseBody again;
  if (!catalogue::parseElementwiseBody(written, again, error))
    broken("elementwise body", "a parsed body does not read back from its own text: " + error);
  if (catalogue::formatElementwiseBody(again) != written)
    broken("elementwise body", "a body read back from its own text writes other text");
}

const Target kTargets[] = {
    {"json", json},       {"safetensors", safetensors}, {"plan", plan},
    {"cluster", cluster}, {"tokens", tokens},           {"elementwise-body", elementwiseBody},
};
const size_t kTargetCount = sizeof kTargets / sizeof kTargets[0];

} // namespace tessel::fuzz
