"""Reads the memory profiles of a trace that tessel estimate --memory-trace or the runner's
--memory-trace wrote (common/memory/MemoryProfile.h): one process per profile, named by the profile's
title ("MODEL: rank R ..."), a "memory" counter event per sample whose args are bytes by class,
a "resident" counter where measured, and instant events at the marks.

read_profiles(path) -> {rank: {"title", "samples": [args...], "resident": [bytes...],
                               "marks": [(ts, label)...]}}, samples in time order.
"""

import json
import re


def read_profiles(path):
    with open(path) as f:
        doc = json.load(f)
    names, samples, resident, marks = {}, {}, {}, {}
    for e in doc["traceEvents"]:
        pid = e.get("pid")
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[pid] = e["args"]["name"]
        elif e.get("ph") == "C" and e.get("name") == "memory":
            samples.setdefault(pid, []).append((e["ts"], e["args"]))
        elif e.get("ph") == "C" and e.get("name") == "resident":
            resident.setdefault(pid, []).append(e["args"]["bytes"])
        elif e.get("ph") == "i":
            marks.setdefault(pid, []).append((e["ts"], e["name"]))
    out = {}
    for pid, name in names.items():
        m = re.search(r"rank (\d+)", name)
        if not m:
            raise SystemExit(f"{path}: process '{name}' names no rank")
        out[int(m.group(1))] = {
            "title": name,
            "samples": [args for _, args in sorted(samples.get(pid, []), key=lambda s: s[0])],
            "resident": resident.get(pid, []),
            "marks": sorted(marks.get(pid, [])),
        }
    return out
