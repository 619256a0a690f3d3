//===- ArenaObserver.h - Which arena buffers a run's kernels touch -*- C++ -*-===//
//
// The runner's --memory-trace: while a program runs, the operands each kernel is actually
// given are placed in the buffers of the program's memory plan (planfile::Program::buffers),
// so the run's memory is measured from what it touches rather than read off the plan. A buffer
// holds its value from the first instruction that touches it to the last (a program input from
// the start, the host writing it before the run; an output to the end, the host reading it
// after). An operand that lies in no buffer holding a value at that instruction, or two
// buffers holding values in the same bytes at once, is a fault of the plan or the runtime,
// reported by the observer.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_RUNTIME_CORE_ARENAOBSERVER_H
#define TESSEL_RUNTIME_CORE_ARENAOBSERVER_H

#include "common/memory/MemoryProfile.h"
#include "common/plan/PlanFile.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessel::rt {

class ArenaObserver {
public:
  /// Observes one run of `program`; `program` must outlive the observer.
  explicit ArenaObserver(const planfile::Program &program);

  /// Instruction `instr` (in order, from 0) was given an operand of `bytes` bytes at `offset`
  /// into the arena.
  void touched(size_t instr, uint64_t offset, uint64_t bytes);
  /// After the run's last instruction: per instruction, the bytes of the buffers that held
  /// values then, by memory class (Kept, Recomputed, Temporaries).
  std::vector<std::array<uint64_t, memory::kMemoryClasses>> finish();
  /// What the run touched that no buffer explains (at most a few, each naming the instruction).
  const std::vector<std::string> &faults() const { return faults_; }

private:
  /// Moves the live set to instruction `instr`: buffers whose span starts by then join it.
  void advance(size_t instr);
  void fault(size_t instr, const std::string &what);

  const planfile::Program &program_;
  /// Buffer indices by their planned first instruction.
  std::vector<std::vector<size_t>> startsAt_;
  /// The buffers that may hold a value at the current instruction, by offset.
  std::map<uint64_t, size_t> live_;
  size_t at_ = 0;
  bool started_ = false;
  /// Per buffer, the first and last instruction that touched it (-1: none yet).
  std::vector<int64_t> first_, last_;
  std::vector<std::string> faults_;
  size_t faultCount_ = 0;
};

} // namespace tessel::rt

#endif // TESSEL_RUNTIME_CORE_ARENAOBSERVER_H
