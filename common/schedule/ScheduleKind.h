//===- ScheduleKind.h - The pipeline schedules a spec can name --*- C++ -*-===//
//
// The one list of pipeline schedule kinds and their spellings: the front end reads a spec's
// `schedule` with it, the sched dialect verifies `sched.pipeline` with it, the plan file
// carries the spelling it prints, and `tessel tune` searches over it. Header-only, so the
// front end (which links nothing of common/) uses the same words as everything after it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_COMMON_SCHEDULE_SCHEDULEKIND_H
#define TESSEL_COMMON_SCHEDULE_SCHEDULEKIND_H

#include <array>
#include <string>
#include <string_view>

namespace tessel::pipeline {

enum class ScheduleKind { AFAB, OneFOneB, Interleaved, ZBH1 };

/// Every kind, in the order lists and messages give them.
constexpr std::array<ScheduleKind, 4> kScheduleKinds = {
    ScheduleKind::AFAB, ScheduleKind::OneFOneB, ScheduleKind::Interleaved, ScheduleKind::ZBH1};

/// The spelling of a kind in specs, IR and plans: "afab", "1f1b", "interleaved", "zbh1".
constexpr const char *scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::AFAB:
    return "afab";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::ZBH1:
    return "zbh1";
  }
  return "?";
}

/// Reads a kind's spelling; false for anything else. IR and plans hold only these; a spec
/// may also say `gpipe`, which the front end reads as `afab`.
inline bool parseScheduleKind(std::string_view name, ScheduleKind &kind) {
  for (ScheduleKind k : kScheduleKinds)
    if (name == scheduleKindName(k)) {
      kind = k;
      return true;
    }
  return false;
}

/// "afab, 1f1b, interleaved, zbh1": the kinds, for messages.
inline std::string scheduleKindList() {
  std::string list;
  for (ScheduleKind k : kScheduleKinds)
    list += (list.empty() ? "" : ", ") + std::string(scheduleKindName(k));
  return list;
}

/// Whether a kind keeps fewer micro-batches in flight than it has, and so needs at least one
/// per stage (every kind but all-forward-all-backward).
constexpr bool needsMicrobatchPerStage(ScheduleKind kind) { return kind != ScheduleKind::AFAB; }

} // namespace tessel::pipeline

#endif // TESSEL_COMMON_SCHEDULE_SCHEDULEKIND_H
