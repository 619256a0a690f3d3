//===- PlanFileFormat.cpp - Reading and writing binary plans --------------===//
//
// The binary form of a plan (docs/plan-format.md): a header with the version and the
// payload's checksum, then the payload. Every read is bounds-checked and every count checked
// against the bytes left, so a damaged file is refused with a reason rather than read past
// its end; a parsed plan is then validated (PlanValidate.cpp) before anything uses it.
//
//===----------------------------------------------------------------------===//

#include "common/plan/PlanFile.h"

#include "common/support/Checksum.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace tessel::planfile {

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

} // namespace tessel::planfile
