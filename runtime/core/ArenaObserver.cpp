//===- ArenaObserver.cpp - Which arena buffers a run's kernels touch -------===//

#include "runtime/core/ArenaObserver.h"

namespace tessel::rt {

namespace {
/// Faults past this many are counted, not described: one wrong offset repeats every step.
constexpr size_t kFaultsKept = 8;
} // namespace

ArenaObserver::ArenaObserver(const planfile::Program &program)
    : program_(program), startsAt_(program.instrs.size()), first_(program.buffers.size(), -1),
      last_(program.buffers.size(), -1) {
  for (size_t b = 0; b < program.buffers.size(); ++b)
    if (program.buffers[b].first < startsAt_.size())
      startsAt_[program.buffers[b].first].push_back(b);
}

void ArenaObserver::fault(size_t instr, const std::string &what) {
  if (++faultCount_ > kFaultsKept)
    return;
  const planfile::Instr &in = program_.instrs[instr];
  faults_.push_back("instruction " + std::to_string(instr) + " of '" + program_.name + "' (" +
                    in.kernel + (in.loc.empty() ? "" : ", from " + in.loc) + "): " + what);
}

void ArenaObserver::advance(size_t instr) {
  if (!started_) {
    started_ = true;
    at_ = 0;
    for (size_t b : startsAt_.empty() ? std::vector<size_t>() : startsAt_[0])
      live_.emplace(program_.buffers[b].offset, b);
    // The host writes the program's inputs before the run.
    for (const planfile::Port &in : program_.inputs)
      if (in.buffer.storage == planfile::Storage::Arena && !program_.instrs.empty())
        touched(0, in.buffer.offset, in.buffer.bytes);
  }
  while (at_ < instr) {
    ++at_;
    // Buffers whose planned span ended leave; those that start now join, and must not share
    // bytes with a buffer that holds a value.
    for (auto it = live_.begin(); it != live_.end();)
      it = program_.buffers[it->second].last < at_ ? live_.erase(it) : std::next(it);
    for (size_t b : startsAt_[at_]) {
      const planfile::ArenaBuffer &buffer = program_.buffers[b];
      auto next = live_.lower_bound(buffer.offset);
      bool overlaps = next != live_.end() && next->first < buffer.offset + buffer.bytes;
      if (next != live_.begin()) {
        const planfile::ArenaBuffer &before = program_.buffers[std::prev(next)->second];
        overlaps = overlaps || before.offset + before.bytes > buffer.offset;
      }
      if (overlaps) {
        fault(at_, "buffer " + std::to_string(b) + " (bytes " + std::to_string(buffer.offset) +
                       ".." + std::to_string(buffer.offset + buffer.bytes) +
                       ") shares bytes with a buffer that still holds a value");
        continue;
      }
      live_.emplace(buffer.offset, b);
    }
  }
}

void ArenaObserver::touched(size_t instr, uint64_t offset, uint64_t bytes) {
  if (instr >= program_.instrs.size() || bytes == 0)
    return;
  if (!started_ || instr > at_)
    advance(instr);
  auto it = live_.upper_bound(offset);
  if (it != live_.begin()) {
    --it;
    const planfile::ArenaBuffer &b = program_.buffers[it->second];
    if (offset >= b.offset && offset + bytes <= b.offset + b.bytes) {
      int64_t &first = first_[it->second], &last = last_[it->second];
      if (first < 0)
        first = static_cast<int64_t>(instr);
      last = static_cast<int64_t>(instr);
      return;
    }
  }
  fault(instr, "an operand at arena bytes " + std::to_string(offset) + ".." +
                   std::to_string(offset + bytes) + " lies in no buffer that holds a value then");
}

std::vector<std::array<uint64_t, memory::kMemoryClasses>> ArenaObserver::finish() {
  const size_t n = program_.instrs.size();
  if (n > 0) {
    // The host reads the program's outputs after the run.
    for (const planfile::Port &out : program_.outputs)
      if (out.buffer.storage == planfile::Storage::Arena)
        touched(n - 1, out.buffer.offset, out.buffer.bytes);
  }
  if (faultCount_ > kFaultsKept)
    faults_.push_back("... and " + std::to_string(faultCount_ - kFaultsKept) + " more");
  // The spans the run showed, of the buffers it touched.
  std::vector<planfile::ArenaBuffer> observed;
  for (size_t b = 0; b < program_.buffers.size(); ++b)
    if (first_[b] >= 0) {
      observed.push_back(program_.buffers[b]);
      observed.back().first = static_cast<uint32_t>(first_[b]);
      observed.back().last = static_cast<uint32_t>(last_[b]);
    }
  return memory::liveBytesByInstruction(n, observed);
}

} // namespace tessel::rt
