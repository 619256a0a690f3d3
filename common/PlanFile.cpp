//===- PlanFile.cpp - Reading and writing binary plans --------------------===//

#include "common/PlanFile.h"

#include "common/Checksum.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

namespace tessel::planfile {

uint64_t StateTensor::bytes() const {
  uint64_t n = dtypeBytes(dtype);
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

bool StateTensor::heldBy(uint32_t stage) const {
  return stages.empty() || std::find(stages.begin(), stages.end(), stage) != stages.end();
}

const Attr *Instr::find(const std::string &name) const {
  for (const Attr &a : attrs)
    if (a.name == name)
      return &a;
  return nullptr;
}

const Attr *Plan::findConfig(const std::string &name) const {
  for (const Attr &a : config)
    if (a.name == name)
      return &a;
  return nullptr;
}

const Program *Plan::findProgram(const std::string &name, uint32_t rank) const {
  const uint32_t stage = pipelineStage(rank);
  for (const Program &p : programs)
    if (p.name == name && p.stage == stage)
      return &p;
  return nullptr;
}

std::vector<uint32_t> Plan::ranksOf(const Program &program) const {
  std::vector<uint32_t> ranks;
  for (uint32_t r = 0; r < worldSize; ++r)
    if (pipelineStage(r) == program.stage)
      ranks.push_back(r);
  return ranks;
}

std::vector<std::vector<uint32_t>> Plan::ranksByStage() const {
  std::vector<std::vector<uint32_t>> byStage(pipelineStages());
  for (uint32_t r = 0; r < worldSize; ++r) {
    const uint32_t stage = pipelineStage(r);
    if (stage < byStage.size())
      byStage[stage].push_back(r);
  }
  return byStage;
}

const Group *Plan::groupNamed(const std::string &name) const {
  for (const Group &g : groups)
    if (g.name == name)
      return &g;
  return nullptr;
}

// Axes out of range count as absent and sizes of 0 as 1, so that these never fail on a plan
// that validatePlan has not seen yet; it refuses both.
uint32_t Plan::groupSize(const Group &group) const {
  uint64_t size = 1;
  for (uint32_t a : group.axes)
    if (a < mesh.size())
      size *= std::max<uint32_t>(mesh[a].size, 1);
  return static_cast<uint32_t>(std::min<uint64_t>(size, UINT32_MAX));
}

std::vector<uint32_t> Plan::meshCoordinates(uint32_t rank) const {
  std::vector<uint32_t> c(mesh.size(), 0);
  for (size_t i = mesh.size(); i-- > 0;) {
    const uint32_t size = std::max<uint32_t>(mesh[i].size, 1);
    c[i] = rank % size;
    rank /= size;
  }
  return c;
}

uint32_t Plan::groupIndex(const Group &group, uint32_t rank) const {
  const std::vector<uint32_t> c = meshCoordinates(rank);
  uint64_t index = 0;
  for (uint32_t a : group.axes)
    if (a < mesh.size())
      index = index * std::max<uint32_t>(mesh[a].size, 1) + c[a];
  return static_cast<uint32_t>(index);
}

std::optional<GroupInstance> Plan::findGroup(const std::string &name, uint32_t rank) const {
  const Group *g = groupNamed(name);
  if (!g)
    return std::nullopt;
  // The rank's own coordinates on the other axes, and each of the group's axes' coordinates
  // in turn, the last fastest: ranks come out ascending, in group-index order.
  std::vector<uint64_t> stride(mesh.size(), 1);
  for (size_t i = mesh.size(); i-- > 1;)
    stride[i - 1] = stride[i] * std::max<uint32_t>(mesh[i].size, 1);
  const std::vector<uint32_t> c = meshCoordinates(rank);
  std::vector<uint32_t> axes;
  uint64_t base = rank;
  for (uint32_t a : g->axes)
    if (a < mesh.size()) {
      axes.push_back(a);
      base -= c[a] * stride[a];
    }
  GroupInstance instance;
  instance.index = groupIndex(*g, rank);
  std::vector<uint32_t> at(axes.size(), 0);
  for (uint32_t n = groupSize(*g); n > 0; --n) {
    uint64_t r = base;
    for (size_t k = 0; k < axes.size(); ++k)
      r += at[k] * stride[axes[k]];
    instance.ranks.push_back(static_cast<uint32_t>(r));
    for (size_t k = axes.size(); k-- > 0;) {
      if (++at[k] < std::max<uint32_t>(mesh[axes[k]].size, 1))
        break;
      at[k] = 0;
    }
  }
  return instance;
}

uint32_t Plan::pipelineStages() const {
  const Group *pp = groupNamed("pp");
  return pp ? groupSize(*pp) : 1;
}

uint32_t Plan::pipelineStage(uint32_t rank) const {
  const Group *pp = groupNamed("pp");
  return pp ? groupIndex(*pp, rank) : 0;
}

bool pipelineChunkOf(const std::string &program, uint32_t &chunk) {
  // At most 9 digits: any chunk number fits, and none overflows.
  size_t dot = program.rfind('.');
  if (dot == std::string::npos || dot + 1 == program.size() || program.size() - dot > 10)
    return false;
  uint32_t c = 0;
  for (size_t i = dot + 1; i < program.size(); ++i) {
    if (program[i] < '0' || program[i] > '9')
      return false;
    c = c * 10 + static_cast<uint32_t>(program[i] - '0');
  }
  chunk = c;
  return true;
}

namespace {

/// The checksum of a payload of plan version `version`.
uint64_t payloadChecksum(uint32_t version, const uint8_t *data, size_t size) {
  return version >= 8 ? xxh3_64(data, size) : fnv1a64(data, size);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

class Writer {
public:
  std::vector<uint8_t> bytes;

  void u8(uint8_t v) { bytes.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string &s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void *p, size_t n) {
    // The format is little-endian; so are the machines Tessel runs on.
    const uint8_t *b = static_cast<const uint8_t *>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  template <typename T, typename F> void vec(const std::vector<T> &v, F each) {
    u64(v.size());
    for (const T &x : v)
      each(x);
  }

  void buffer(const BufferRef &b) {
    u8(static_cast<uint8_t>(b.storage));
    u32(b.state);
    u64(b.offset);
    u64(b.bytes);
    u8(static_cast<uint8_t>(b.dtype));
  }
  void attr(const Attr &a) {
    str(a.name);
    u8(static_cast<uint8_t>(a.value.index()));
    std::visit(
        [&](const auto &v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>)
            i64(v);
          else if constexpr (std::is_same_v<T, double>)
            f64(v);
          else if constexpr (std::is_same_v<T, std::string>)
            str(v);
          else
            vec(v, [&](int64_t x) { i64(x); });
        },
        a.value);
  }
  void port(const Port &p) {
    str(p.name);
    u8(static_cast<uint8_t>(p.dtype));
    vec(p.shape, [&](int64_t x) { i64(x); });
    vec(p.split, [&](const std::string &s) { str(s); });
    buffer(p.buffer);
  }
};

//===----------------------------------------------------------------------===//
// Reading: every read is bounds-checked, and counts are checked against the bytes left so a
// corrupt length cannot make us allocate gigabytes.
//===----------------------------------------------------------------------===//

class Reader {
public:
  Reader(const uint8_t *p, size_t n) : p_(p), end_(p + n) {}
  std::string error;

  bool ok() const { return error.empty(); }
  bool atEnd() const { return p_ == end_; }

  uint8_t u8() {
    uint8_t v = 0;
    raw(&v, 1);
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    raw(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    raw(&v, 8);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    raw(&v, 8);
    return v;
  }
  double f64() {
    double v = 0;
    raw(&v, 8);
    return v;
  }
  std::string str() {
    uint64_t n = count(1);
    std::string s;
    if (ok()) {
      s.assign(reinterpret_cast<const char *>(p_), n);
      p_ += n;
    }
    return s;
  }
  /// A length prefix for elements of at least `minBytes` each.
  uint64_t count(uint64_t minBytes) {
    uint64_t n = u64();
    if (ok() && n > static_cast<uint64_t>(end_ - p_) / (minBytes ? minBytes : 1))
      fail("a length of " + std::to_string(n) + " runs past the end of the plan");
    return ok() ? n : 0;
  }
  template <typename T, typename F> void vec(std::vector<T> &v, uint64_t minBytes, F each) {
    uint64_t n = count(minBytes);
    v.clear();
    for (uint64_t i = 0; i < n && ok(); ++i)
      v.push_back(each());
  }
  void fail(const std::string &why) {
    if (error.empty())
      error = why;
  }

  DType dtype() {
    uint8_t t = u8();
    if (t > static_cast<uint8_t>(kLastDType))
      fail("unknown element type " + std::to_string(t));
    return static_cast<DType>(t);
  }
  BufferRef buffer() {
    BufferRef b;
    uint8_t s = u8();
    if (s > static_cast<uint8_t>(Storage::State))
      fail("unknown storage kind " + std::to_string(s));
    b.storage = static_cast<Storage>(s);
    b.state = u32();
    b.offset = u64();
    b.bytes = u64();
    b.dtype = dtype();
    return b;
  }
  Attr attr() {
    Attr a;
    a.name = str();
    switch (u8()) {
    case 0:
      a.value = i64();
      break;
    case 1:
      a.value = f64();
      break;
    case 2:
      a.value = str();
      break;
    case 3: {
      std::vector<int64_t> v;
      vec(v, 8, [&] { return i64(); });
      a.value = std::move(v);
      break;
    }
    default:
      fail("attribute '" + a.name + "' has an unknown kind");
    }
    return a;
  }
  Port port() {
    Port p;
    p.name = str();
    p.dtype = dtype();
    vec(p.shape, 8, [&] { return i64(); });
    vec(p.split, 8, [&] { return str(); });
    p.buffer = buffer();
    return p;
  }

private:
  void raw(void *out, size_t n) {
    if (!ok())
      return;
    if (static_cast<size_t>(end_ - p_) < n) {
      fail("the plan is truncated");
      return;
    }
    std::memcpy(out, p_, n);
    p_ += n;
  }
  const uint8_t *p_, *end_;
};

constexpr size_t kHeaderBytes = 32;
/// Instruction flags: bit 0, the instruction recomputes in the backward pass.
constexpr uint32_t kInstrRecomputed = 1;

} // namespace

const char *bufferKindName(BufferKind kind) {
  switch (kind) {
  case BufferKind::Temporary:
    return "temporary";
  case BufferKind::Input:
    return "input";
  case BufferKind::Kept:
    return "kept";
  case BufferKind::Recomputed:
    return "recomputed";
  }
  return "?";
}

std::vector<uint8_t> serializePlan(const Plan &plan, uint32_t version) {
  // The header goes in front of the payload once the payload is known; its bytes are kept
  // free so that a large plan is not copied.
  Writer w;
  w.bytes.resize(kHeaderBytes);
  w.str(plan.model);
  w.u32(plan.worldSize);
  w.u32(plan.streams);
  w.vec(plan.config, [&](const Attr &a) { w.attr(a); });
  w.vec(plan.state, [&](const StateTensor &t) {
    w.str(t.name);
    w.str(t.role);
    w.str(t.of);
    w.u8(static_cast<uint8_t>(t.dtype));
    w.vec(t.shape, [&](int64_t x) { w.i64(x); });
    w.vec(t.dims, [&](const std::string &s) { w.str(s); });
    w.vec(t.split, [&](const std::string &s) { w.str(s); });
    w.str(t.init);
    w.f64(t.initA);
    w.f64(t.initB);
    w.vec(t.stages, [&](uint32_t x) { w.u32(x); });
    if (version >= 9) {
      w.str(t.initSource);
      w.vec(t.initSlice, [&](int64_t x) { w.i64(x); });
    }
  });
  w.vec(plan.mesh, [&](const MeshAxis &a) {
    w.str(a.name);
    w.u32(a.size);
  });
  w.vec(plan.groups, [&](const Group &g) {
    w.str(g.name);
    w.vec(g.axes, [&](uint32_t a) { w.u32(a); });
  });
  w.vec(plan.programs, [&](const Program &p) {
    w.str(p.name);
    w.u32(p.stage);
    w.u64(p.arenaBytes);
    w.vec(p.inputs, [&](const Port &x) { w.port(x); });
    w.vec(p.outputs, [&](const Port &x) { w.port(x); });
    w.vec(p.instrs, [&](const Instr &i) {
      w.str(i.kernel);
      w.vec(i.inputs, [&](const BufferRef &b) { w.buffer(b); });
      w.vec(i.outputs, [&](const BufferRef &b) { w.buffer(b); });
      w.vec(i.attrs, [&](const Attr &a) { w.attr(a); });
      w.str(i.loc);
      w.u32(i.stream);
      w.u32(i.recomputed ? kInstrRecomputed : 0);
    });
    if (version >= 10)
      w.vec(p.buffers, [&](const ArenaBuffer &b) {
        w.u64(b.offset);
        w.u64(b.bytes);
        w.u32(b.first);
        w.u32(b.last);
        w.u8(static_cast<uint8_t>(b.kind));
      });
  });
  if (version >= 11) {
    // The decode plan travels as a plan file of its own inside this one.
    w.u8(plan.decoder ? 1 : 0);
    if (plan.decoder) {
      std::vector<uint8_t> nested = serializePlan(*plan.decoder, version);
      w.str(std::string(nested.begin(), nested.end()));
    }
    w.str(plan.decoderRefused);
  }

  const uint64_t payload = w.bytes.size() - kHeaderBytes;
  Writer header;
  header.raw(kPlanMagic, sizeof(kPlanMagic));
  header.u32(version);
  header.u32(0);
  header.u64(payload);
  header.u64(payloadChecksum(version, w.bytes.data() + kHeaderBytes, payload));
  std::memcpy(w.bytes.data(), header.bytes.data(), kHeaderBytes);
  return std::move(w.bytes);
}

bool parsePlan(const uint8_t *data, size_t size, Plan &plan, std::string &error) {
  if (size < sizeof(kPlanMagic) || std::memcmp(data, kPlanMagic, sizeof(kPlanMagic)) != 0) {
    error = "not a Tessel plan (no TESSPLAN header)";
    return false;
  }
  if (size < kHeaderBytes) {
    error = "the plan is truncated inside its header";
    return false;
  }
  Reader header(data + 8, kHeaderBytes - 8);
  uint32_t version = header.u32();
  uint32_t flags = header.u32();
  uint64_t payload = header.u64();
  uint64_t checksum = header.u64();
  if (version < kOldestPlanVersion || version > kPlanVersion) {
    error = "plan version " + std::to_string(version) + ", this runtime reads " +
            std::to_string(kOldestPlanVersion) + " to " + std::to_string(kPlanVersion) +
            ": recompile the model";
    return false;
  }
  if (flags != 0) {
    error =
        "the plan sets header flags " + std::to_string(flags) + " that this runtime does not know";
    return false;
  }
  if (payload != size - kHeaderBytes) {
    error = "the plan should hold " + std::to_string(payload) + " bytes after its header but " +
            "holds " + std::to_string(size - kHeaderBytes) + " (truncated or extended)";
    return false;
  }
  if (payloadChecksum(version, data + kHeaderBytes, payload) != checksum) {
    error = "the plan's checksum does not match its contents (the file is corrupt)";
    return false;
  }

  Reader r(data + kHeaderBytes, payload);
  plan = Plan();
  plan.version = version;
  plan.model = r.str();
  plan.worldSize = r.u32();
  plan.streams = r.u32();
  r.vec(plan.config, 10, [&] { return r.attr(); });
  r.vec(plan.state, 48, [&] {
    StateTensor t;
    t.name = r.str();
    t.role = r.str();
    t.of = r.str();
    t.dtype = r.dtype();
    r.vec(t.shape, 8, [&] { return r.i64(); });
    r.vec(t.dims, 8, [&] { return r.str(); });
    r.vec(t.split, 8, [&] { return r.str(); });
    t.init = r.str();
    t.initA = r.f64();
    t.initB = r.f64();
    r.vec(t.stages, 4, [&] { return r.u32(); });
    if (version >= 9) {
      t.initSource = r.str();
      r.vec(t.initSlice, 8, [&] { return r.i64(); });
    }
    return t;
  });
  r.vec(plan.mesh, 12, [&] {
    MeshAxis a;
    a.name = r.str();
    a.size = r.u32();
    return a;
  });
  r.vec(plan.groups, 16, [&] {
    Group g;
    g.name = r.str();
    r.vec(g.axes, 4, [&] { return r.u32(); });
    return g;
  });
  r.vec(plan.programs, 40, [&] {
    Program p;
    p.name = r.str();
    p.stage = r.u32();
    p.arenaBytes = r.u64();
    r.vec(p.inputs, 30, [&] { return r.port(); });
    r.vec(p.outputs, 30, [&] { return r.port(); });
    r.vec(p.instrs, 40, [&] {
      Instr i;
      i.kernel = r.str();
      r.vec(i.inputs, 22, [&] { return r.buffer(); });
      r.vec(i.outputs, 22, [&] { return r.buffer(); });
      r.vec(i.attrs, 10, [&] { return r.attr(); });
      i.loc = r.str();
      i.stream = r.u32();
      const uint32_t flags = r.u32();
      if (flags & ~kInstrRecomputed)
        r.fail("an instruction has unknown flags " + std::to_string(flags));
      i.recomputed = (flags & kInstrRecomputed) != 0;
      return i;
    });
    if (version >= 10)
      r.vec(p.buffers, 25, [&] {
        ArenaBuffer b;
        b.offset = r.u64();
        b.bytes = r.u64();
        b.first = r.u32();
        b.last = r.u32();
        const uint8_t kind = r.u8();
        if (kind >= kBufferKinds)
          r.fail("a buffer has unknown kind " + std::to_string(kind));
        b.kind = static_cast<BufferKind>(kind);
        return b;
      });
    return p;
  });
  std::string decoderBytes;
  if (version >= 11) {
    const uint8_t hasDecoder = r.u8();
    if (hasDecoder > 1)
      r.fail("the plan's decode-plan flag is " + std::to_string(hasDecoder));
    if (hasDecoder == 1)
      decoderBytes = r.str();
    plan.decoderRefused = r.str();
  }
  if (r.ok() && !r.atEnd())
    r.fail("the plan has bytes after its last program");
  if (!r.ok()) {
    error = r.error;
    return false;
  }
  if (!decoderBytes.empty()) {
    auto decoder = std::make_shared<Plan>();
    const auto *bytes = reinterpret_cast<const uint8_t *>(decoderBytes.data());
    if (!parsePlan(bytes, decoderBytes.size(), *decoder, error)) {
      error = "its decode plan: " + error;
      return false;
    }
    if (decoder->decoder) {
      error = "its decode plan holds a decode plan of its own";
      return false;
    }
    plan.decoder = std::move(decoder);
  }
  return validatePlan(plan, error);
}

namespace {

/// The mesh's axes are named once each and of positive sizes that multiply to the world; each
/// group is named once and spans known axes in ascending order.
bool validateMesh(const Plan &plan, std::string &error) {
  uint64_t ranks = 1;
  std::set<std::string> axisNames;
  for (size_t a = 0; a < plan.mesh.size(); ++a) {
    const MeshAxis &axis = plan.mesh[a];
    if (axis.name.empty() || !axisNames.insert(axis.name).second) {
      error = "mesh axis " + std::to_string(a) +
              (axis.name.empty() ? " has no name" : " '" + axis.name + "' is named twice");
      return false;
    }
    if (axis.size == 0) {
      error = "mesh axis '" + axis.name + "' has size 0";
      return false;
    }
    ranks = std::min<uint64_t>(ranks * axis.size, uint64_t(1) << 40);
  }
  if (ranks != plan.worldSize) {
    std::string sizes;
    for (const MeshAxis &axis : plan.mesh)
      sizes += (sizes.empty() ? "" : ", ") + axis.name + " = " + std::to_string(axis.size);
    error = "the mesh {" + sizes + "} has " + std::to_string(ranks) +
            (ranks == 1 ? " rank" : " ranks") + ", but the plan has " +
            std::to_string(plan.worldSize);
    return false;
  }
  std::set<std::string> groupNames;
  for (const Group &g : plan.groups) {
    if (g.name.empty() || !groupNames.insert(g.name).second) {
      error = g.name.empty() ? "a group has no name" : "group '" + g.name + "' is described twice";
      return false;
    }
    for (size_t k = 0; k < g.axes.size(); ++k) {
      if (g.axes[k] >= plan.mesh.size()) {
        error = "group '" + g.name + "' spans axis " + std::to_string(g.axes[k]) +
                ", but the mesh has " + std::to_string(plan.mesh.size());
        return false;
      }
      if (k > 0 && g.axes[k] <= g.axes[k - 1]) {
        error = "group '" + g.name + "' lists its axes out of order (outermost first, once each)";
        return false;
      }
    }
  }
  return true;
}

/// A `split` has one entry per dim (or none), each naming a group or "".
bool validateSplit(const Plan &plan, const std::vector<std::string> &split, size_t rank,
                   const std::string &what, std::string &error) {
  if (!split.empty() && split.size() != rank) {
    error = what + " has " + std::to_string(split.size()) + " split entries for " +
            std::to_string(rank) + " dims";
    return false;
  }
  for (const std::string &g : split)
    if (!g.empty() && !plan.groupNamed(g)) {
      error = what + " is split over group '" + g + "', which the plan does not have";
      return false;
    }
  return true;
}

/// A (program, stage) pair appears once. A program without a chunk is on every stage (the
/// SPMD programs: forward_backward, optimizer_step, eval, sample); a pipeline program of chunk c
/// is on stage c % stages and on no other.
bool validateProgramStages(const Plan &plan, std::string &error) {
  const uint32_t stages = plan.pipelineStages();
  std::map<std::string, std::vector<int>> count; // Per program, its versions per stage.
  for (const Program &p : plan.programs) {
    std::vector<int> &c = count[p.name];
    c.resize(stages, 0);
    if (++c[p.stage] > 1) {
      error = "program '" + p.name + "' appears twice for stage " + std::to_string(p.stage);
      return false;
    }
  }
  for (const auto &[name, c] : count) {
    uint32_t chunk = 0;
    bool pipelined = pipelineChunkOf(name, chunk);
    if (!pipelined && name.find('.') != std::string::npos) {
      error = "program '" + name + "' has a '.' but no chunk number after it";
      return false;
    }
    for (uint32_t stage = 0; stage < stages; ++stage) {
      bool wanted = !pipelined || stage == chunk % stages;
      if (wanted && c[stage] == 0) {
        error = "program '" + name + "' has no version for pipeline stage " + std::to_string(stage);
        if (pipelined)
          error += ", which runs chunk " + std::to_string(chunk);
        return false;
      }
      if (!wanted && c[stage] != 0) {
        error = "program '" + name + "' is on pipeline stage " + std::to_string(stage) +
                ", but chunk " + std::to_string(chunk) + " runs on stage " +
                std::to_string(chunk % stages);
        return false;
      }
    }
  }
  return true;
}

} // namespace

/// Bounds on what a plan may describe, checked before anything is allocated for it: far above
/// any real model or cluster, far below what a damaged count can make a process try to hold.
constexpr uint32_t kMaxRanks = 1u << 20;
constexpr uint32_t kMaxStreams = 64;
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 44; // 16 TiB

/// The bytes of `elementBytes`-byte elements over `shape`, or false (with `error`) when the
/// count is not positive or exceeds kMaxTensorBytes.
static bool boundedBytes(const std::vector<int64_t> &shape, uint64_t elementBytes,
                         const std::string &what, std::string &error) {
  unsigned __int128 bytes = elementBytes;
  std::string dims;
  for (int64_t d : shape)
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  for (int64_t d : shape) {
    if (d <= 0 || d > (int64_t(1) << 40)) {
      error = what + " has an invalid dim " + std::to_string(d) + " in [" + dims + "]";
      return false;
    }
    bytes *= static_cast<uint64_t>(d);
    if (bytes > kMaxTensorBytes) {
      error = what + " of shape [" + dims + "] is larger than a plan may describe (16 TiB)";
      return false;
    }
  }
  return true;
}

/// A tensor's role is one the runtime knows; the runtime initialises and checkpoints by role,
/// so a tensor it misread would train silently wrong. Parameters, and the working copies the
/// `working_copies` program makes from them, are checked further: a copy is a 16-bit tensor
/// of a parameter's own shape, split and stages (`params`: the plan's parameters by name).
static bool validateRole(const std::unordered_map<std::string, const StateTensor *> &params,
                         const StateTensor &t, std::string &error) {
  static const char *const kRoles[] = {"param",   "grad",     "adam_m",  "adam_v",      "momentum",
                                       "working", "kv_cache", "decode_state"};
  if (std::find(std::begin(kRoles), std::end(kRoles), t.role) == std::end(kRoles)) {
    error = "state tensor '" + t.name + "' has the unknown role '" + t.role + "'";
    return false;
  }
  if (t.role == "param" && (t.dtype != DType::F32 || !t.of.empty())) {
    error = "parameter '" + t.name + "' must be f32 and belong to no other tensor";
    return false;
  }
  if (t.role != "working")
    return true;
  auto found = params.find(t.of);
  const StateTensor *master = found == params.end() ? nullptr : found->second;
  if (!master || dtypeBytes(t.dtype) != 2 || !isFloat(t.dtype) || t.shape != master->shape ||
      t.split != master->split || t.stages != master->stages) {
    error = "working copy '" + t.name + "' must be a 16-bit float tensor of a parameter's " +
            "shape, split and stages" + (master ? "" : " ('" + t.of + "' is no parameter)");
    return false;
  }
  return true;
}

bool validatePlan(const Plan &plan, std::string &error) {
  if (plan.worldSize == 0 || plan.streams == 0) {
    error = "the plan has no ranks or no streams";
    return false;
  }
  if (plan.worldSize > kMaxRanks || plan.streams > kMaxStreams) {
    error = "the plan has " + std::to_string(plan.worldSize) + " ranks and " +
            std::to_string(plan.streams) + " streams; at most " + std::to_string(kMaxRanks) +
            " and " + std::to_string(kMaxStreams) + " can be run";
    return false;
  }
  if (!validateMesh(plan, error))
    return false;
  std::unordered_map<std::string, const StateTensor *> params;
  for (const StateTensor &t : plan.state)
    if (t.role == "param")
      params.emplace(t.name, &t);
  for (const StateTensor &t : plan.state) {
    if (!boundedBytes(t.shape, dtypeBytes(t.dtype), "state tensor '" + t.name + "'", error))
      return false;
    if (!validateSplit(plan, t.split, t.shape.size(), "state tensor '" + t.name + "'", error))
      return false;
    for (uint32_t stage : t.stages)
      if (stage >= plan.pipelineStages()) {
        error = "state tensor '" + t.name + "' is held by pipeline stage " + std::to_string(stage) +
                " of " + std::to_string(plan.pipelineStages());
        return false;
      }
    if (!validateRole(params, t, error))
      return false;
  }
  auto check = [&](const Program &p, const BufferRef &b, const std::string &what) {
    uint64_t limit = p.arenaBytes;
    if (b.storage == Storage::State) {
      if (b.state >= plan.state.size()) {
        error = what + " refers to state tensor #" + std::to_string(b.state) + " of " +
                std::to_string(plan.state.size());
        return false;
      }
      const StateTensor &t = plan.state[b.state];
      if (!t.stages.empty() && !t.heldBy(p.stage)) {
        error = what + " refers to state tensor '" + t.name + "', which its pipeline stage " +
                std::to_string(p.stage) + " does not hold";
        return false;
      }
      limit = t.bytes();
    }
    if (b.offset > limit || b.bytes > limit - b.offset) {
      error = what + " (bytes " + std::to_string(b.offset) + ".." +
              std::to_string(b.offset + b.bytes) + ") lies outside its buffer of " +
              std::to_string(limit) + " bytes";
      return false;
    }
    return true;
  };
  // The two ends of a transfer, a send and the receives of its tag (in whichever programs),
  // move one element type: a communicator carries bytes, and a receive of another type would
  // read them as that type.
  std::unordered_map<int64_t, std::pair<DType, const Program *>> transferTypes;
  for (const Program &p : plan.programs) {
    if (p.arenaBytes > kMaxTensorBytes) {
      error = "program '" + p.name + "' asks for an arena of " + std::to_string(p.arenaBytes) +
              " bytes, more than a plan may describe (16 TiB)";
      return false;
    }
    for (const std::vector<Port> *ports : {&p.inputs, &p.outputs})
      for (const Port &port : *ports)
        if (!boundedBytes(port.shape, 4, "port '" + port.name + "' of '" + p.name + "'", error))
          return false;
    if (p.stage >= plan.pipelineStages()) {
      error = "program '" + p.name + "' is for pipeline stage " + std::to_string(p.stage) + " of " +
              std::to_string(plan.pipelineStages());
      return false;
    }
    for (const Port &port : p.inputs)
      if (!check(p, port.buffer, "input '" + port.name + "' of '" + p.name + "'") ||
          !validateSplit(plan, port.split, port.shape.size(),
                         "input '" + port.name + "' of '" + p.name + "'", error))
        return false;
    for (const Port &port : p.outputs)
      if (!check(p, port.buffer, "output '" + port.name + "' of '" + p.name + "'") ||
          !validateSplit(plan, port.split, port.shape.size(),
                         "output '" + port.name + "' of '" + p.name + "'", error))
        return false;
    for (size_t i = 0; i < p.buffers.size(); ++i) {
      const ArenaBuffer &b = p.buffers[i];
      const std::string what = "buffer " + std::to_string(i) + " of '" + p.name + "'";
      if (b.offset > p.arenaBytes || b.bytes > p.arenaBytes - b.offset) {
        error = what + " (bytes " + std::to_string(b.offset) + ".." +
                std::to_string(b.offset + b.bytes) + ") lies outside the arena of " +
                std::to_string(p.arenaBytes) + " bytes";
        return false;
      }
      if (b.first > b.last || b.last >= p.instrs.size()) {
        error = what + " holds its value from instruction " + std::to_string(b.first) + " to " +
                std::to_string(b.last) + ", but the program has " +
                std::to_string(p.instrs.size()) + " instructions";
        return false;
      }
    }
    for (size_t i = 0; i < p.instrs.size(); ++i) {
      const Instr &in = p.instrs[i];
      std::string what = "operand of instruction " + std::to_string(i) + " (" + in.kernel +
                         ") in '" + p.name + "'";
      for (const BufferRef &b : in.inputs)
        if (!check(p, b, what))
          return false;
      for (const BufferRef &b : in.outputs)
        if (!check(p, b, what))
          return false;
      if (in.stream >= plan.streams) {
        error = what + " uses stream " + std::to_string(in.stream);
        return false;
      }
      const Attr *tag = in.find("tag");
      const std::vector<BufferRef> &data = in.kernel == "send" ? in.inputs : in.outputs;
      if ((in.kernel == "send" || in.kernel == "recv") && tag && !data.empty() &&
          std::holds_alternative<int64_t>(tag->value)) {
        auto [end, fresh] =
            transferTypes.try_emplace(std::get<int64_t>(tag->value), data.front().dtype, &p);
        if (!fresh && end->second.first != data.front().dtype) {
          error = "instruction " + std::to_string(i) + " (" + in.kernel + ") in '" + p.name +
                  "' moves " + dtypeName(data.front().dtype) + " with tag " +
                  std::to_string(std::get<int64_t>(tag->value)) + ", which '" +
                  end->second.second->name + "' moves as " + dtypeName(end->second.first);
          return false;
        }
      }
      for (const char *key : {"group", "row_group", "col_group", "head_group"}) {
        const Attr *a = in.find(key);
        if (a && std::holds_alternative<std::string>(a->value) &&
            !plan.groupNamed(std::get<std::string>(a->value))) {
          error = "instruction " + std::to_string(i) + " (" + in.kernel + ") in '" + p.name +
                  "' names group '" + std::get<std::string>(a->value) +
                  "', which the plan does not have";
          return false;
        }
      }
    }
  }
  if (!validateProgramStages(plan, error))
    return false;
  // The decode plan runs on the same ranks, laid out the same way.
  if (plan.decoder) {
    const Plan &d = *plan.decoder;
    bool sameMesh = d.worldSize == plan.worldSize && d.mesh.size() == plan.mesh.size();
    for (size_t i = 0; sameMesh && i < d.mesh.size(); ++i)
      sameMesh = d.mesh[i].name == plan.mesh[i].name && d.mesh[i].size == plan.mesh[i].size;
    if (!sameMesh) {
      error = "its decode plan is laid out on another mesh than the plan";
      return false;
    }
    if (!validatePlan(d, error)) {
      error = "its decode plan: " + error;
      return false;
    }
  }
  return true;
}

} // namespace tessel::planfile
