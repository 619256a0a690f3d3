//===- Cluster.cpp - Reading and writing cluster files --------------------===//
//
// One `key = value` per line, `#` starts a comment. A value is a quoted string (name), an
// integer (node.accelerators), a number with the unit its key's quantity needs (a rate, a
// bandwidth, a size, a time), a bare fraction (efficiency.memory), a word (attention.kernel,
// recompute.replay), a table of `size:efficiency` pairs or a list of measured GEMM shapes
// (`BATCHxMxNxK:efficiency`). Every problem is reported at its line
// and column.
//
//===----------------------------------------------------------------------===//

#include "common/cluster/Cluster.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace tessel::cluster {

double EfficiencyTable::at(double size) const {
  if (points.empty())
    return 1;
  if (size <= points.front().first)
    return points.front().second;
  if (size >= points.back().first)
    return points.back().second;
  for (size_t i = 1; i < points.size(); ++i) {
    auto [x1, y1] = points[i];
    if (size > x1)
      continue;
    auto [x0, y0] = points[i - 1];
    double t = (std::log(size) - std::log(x0)) / (std::log(x1) - std::log(x0));
    return y0 + t * (y1 - y0);
  }
  return points.back().second;
}

double Cluster::gemmEfficiency(double batch, double m, double n, double k) const {
  for (const GemmShape &s : gemmShapes)
    if (s.batch == batch && s.m == m && s.n == n && s.k == k)
      return s.efficiency;
  return gemm.at(std::min({m, n, k}));
}

namespace {

enum class Quantity { Name, Count, Rate, Bandwidth, Size, Time, Fraction, Table, Shapes, Word };

struct Key {
  const char *name;
  Quantity quantity;
  bool required;
};

// Every key a cluster file may have, in the order formatCluster writes them.
const Key kKeys[] = {
    {"name", Quantity::Name, true},
    {"accelerator.device", Quantity::Name, false},
    {"accelerator.bf16", Quantity::Rate, true},
    {"accelerator.fp32", Quantity::Rate, true},
    {"accelerator.memory", Quantity::Size, true},
    {"accelerator.bandwidth", Quantity::Bandwidth, true},
    {"node.accelerators", Quantity::Count, true},
    {"intra.bandwidth", Quantity::Bandwidth, true},
    {"intra.latency", Quantity::Time, true},
    {"inter.bandwidth", Quantity::Bandwidth, true},
    {"inter.latency", Quantity::Time, true},
    {"efficiency.gemm", Quantity::Table, true},
    {"efficiency.gemm.shapes", Quantity::Shapes, false},
    {"efficiency.attention", Quantity::Table, true},
    {"efficiency.memory", Quantity::Fraction, true},
    {"attention.kernel", Quantity::Word, false},
    {"recompute.replay", Quantity::Word, false},
    {"stash.bandwidth", Quantity::Bandwidth, false},
    {"overhead.kernel", Quantity::Time, false},
    {"overhead.collective", Quantity::Time, false},
};

struct Unit {
  const char *word;
  double scale;
};

const std::vector<Unit> &unitsOf(Quantity q) {
  static const std::vector<Unit> rate = {
      {"FLOP/s", 1}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15}};
  static const std::vector<Unit> bandwidth = {
      {"B/s", 1},     {"KB/s", 1e3},           {"MB/s", 1e6},     {"GB/s", 1e9},
      {"TB/s", 1e12}, {"GiB/s", 1073741824.0}, {"Gb/s", 1e9 / 8}, {"MiB/s", 1048576.0}};
  static const std::vector<Unit> size = {
      {"B", 1},           {"KB", 1e3},           {"MB", 1e6},
      {"GB", 1e9},        {"TB", 1e12},          {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  static const std::vector<Unit> time = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  static const std::vector<Unit> none;
  switch (q) {
  case Quantity::Rate:
    return rate;
  case Quantity::Bandwidth:
    return bandwidth;
  case Quantity::Size:
    return size;
  case Quantity::Time:
    return time;
  default:
    return none;
  }
}

std::string unitList(Quantity q) {
  std::string s;
  for (const Unit &u : unitsOf(q))
    s += (s.empty() ? "" : ", ") + std::string(u.word);
  return s;
}

/// Reads a decimal number at `text[pos]` (an optional sign, digits with an optional point, an
/// optional exponent); false if there is none. Hexadecimal, "inf" and "nan", which strtod would
/// take, are not numbers here: "0x10 GB/s" is 0 followed by the unit "x10 GB/s", refused.
bool readNumber(const std::string &text, size_t &pos, double &value) {
  size_t end = pos;
  auto digits = [&] {
    size_t start = end;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
      ++end;
    return end > start;
  };
  if (end < text.size() && (text[end] == '+' || text[end] == '-'))
    ++end;
  bool whole = digits(), fraction = false;
  if (end < text.size() && text[end] == '.') {
    ++end;
    fraction = digits();
  }
  if (!whole && !fraction)
    return false;
  if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
    size_t mark = end++;
    if (end < text.size() && (text[end] == '+' || text[end] == '-'))
      ++end;
    if (!digits())
      end = mark;
  }
  value = std::strtod(text.substr(pos, end - pos).c_str(), nullptr);
  if (!std::isfinite(value))
    return false;
  pos = end;
  return true;
}

/// The values a figure of quantity `q` may take, in its base unit: wide enough for any machine
/// from a laptop to the largest accelerator, narrow enough that a typo (1e-320 GB/s, 1e300 GB)
/// cannot make a step take "inf s".
struct Range {
  double low, high;
  const char *text;
};
const Range *rangeOf(Quantity q) {
  static const Range rate = {1e6, 1e18, "1 MFLOP/s to 1 EFLOP/s"};
  static const Range bandwidth = {1e3, 1e15, "1 KB/s to 1 PB/s"};
  static const Range size = {1e3, 1e15, "1 KB to 1 PB"};
  static const Range time = {1e-12, 3600, "1 ps to 1 hour"};
  switch (q) {
  case Quantity::Rate:
    return &rate;
  case Quantity::Bandwidth:
    return &bandwidth;
  case Quantity::Size:
    return &size;
  case Quantity::Time:
    return &time;
  default:
    return nullptr;
  }
}

struct Parser {
  const std::string &file;
  std::string &error;
  int line = 0;

  bool fail(size_t col, const std::string &message) {
    error =
        file + ":" + std::to_string(line) + ":" + std::to_string(col + 1) + ": error: " + message;
    return false;
  }

  /// A number with its key's unit, at `value[pos..]` (the whole rest of the value).
  bool quantity(const Key &key, const std::string &value, size_t at, double &out) {
    size_t pos = 0;
    if (!readNumber(value, pos, out))
      return fail(at, std::string(key.name) + " needs a number, not '" + value + "'");
    while (pos < value.size() && value[pos] == ' ')
      ++pos;
    std::string unit = value.substr(pos);
    const std::vector<Unit> &units = unitsOf(key.quantity);
    if (units.empty()) {
      if (!unit.empty())
        return fail(at + pos, std::string(key.name) + " takes a plain number, not '" + unit + "'");
    } else {
      auto it =
          std::find_if(units.begin(), units.end(), [&](const Unit &u) { return unit == u.word; });
      if (it == units.end())
        return fail(at + pos, std::string(key.name) + " needs a unit (" + unitList(key.quantity) +
                                  ")" + (unit.empty() ? "" : ", not '" + unit + "'"));
      out *= it->scale;
    }
    // An overhead may be nothing; every other figure must be there.
    bool overhead = std::string(key.name).rfind("overhead.", 0) == 0;
    if (overhead ? !(out >= 0) : !(out > 0))
      return fail(at, std::string(key.name) +
                          (overhead ? " must not be negative" : " must be positive"));
    if (const Range *range = rangeOf(key.quantity);
        range && !(overhead && out == 0) && (out < range->low || out > range->high))
      return fail(at, std::string(key.name) + " = " + value + " is outside what a cluster file takes (" +
                          range->text + ")");
    if (key.quantity == Quantity::Fraction && out > 1)
      return fail(at, std::string(key.name) + " is a fraction of the peak, in (0, 1]");
    return true;
  }

  /// Calls `entry(left, efficiency, column, word)` for each `LEFT:efficiency` word of `value`
  /// (which starts at column `at`), the efficiency checked to be in (0, 1]; `what` says in an error
  /// what the words should be. False at the first problem, or if there is no word.
  template <typename Entry>
  bool entries(const Key &key, const std::string &value, size_t at, const std::string &what,
               Entry entry) {
    std::istringstream words(value);
    std::string word;
    size_t from = 0, count = 0;
    while (words >> word) {
      size_t col = at + value.find(word, from);
      from = value.find(word, from) + word.size();
      size_t colon = word.find(':'), q = 0;
      double eff = 0;
      std::string right = colon == std::string::npos ? "" : word.substr(colon + 1);
      if (colon == std::string::npos || !readNumber(right, q, eff) || q != right.size())
        return fail(col, std::string(key.name) + " needs " + what + ", not '" + word + "'");
      if (!(eff > 0) || eff > 1)
        return fail(col + colon + 1,
                    std::string(key.name) + ": an efficiency is a fraction of the peak, in (0, 1]");
      if (!entry(word.substr(0, colon), eff, col, word))
        return false;
      ++count;
    }
    if (count == 0)
      return fail(at, std::string(key.name) + " needs " + what);
    return true;
  }

  /// "size:efficiency size:efficiency ..." with sizes ascending.
  bool table(const Key &key, const std::string &value, size_t at, EfficiencyTable &out) {
    const std::string what = "size:efficiency pairs";
    return entries(key, value, at, what,
                   [&](const std::string &left, double eff, size_t col, const std::string &word) {
                     double size = 0;
                     size_t p = 0;
                     if (!readNumber(left, p, size) || p != left.size())
                       return fail(col, std::string(key.name) + " needs " + what + ", not '" +
                                            word + "'");
                     if (!(size > 0))
                       return fail(col, std::string(key.name) + ": the size must be positive");
                     if (!out.points.empty() && size <= out.points.back().first)
                       return fail(col, std::string(key.name) + ": sizes must be ascending");
                     out.points.push_back({size, eff});
                     return true;
                   });
  }

  /// "BxMxNxK:efficiency ...": a batch of products and their sizes, each shape once.
  bool shapes(const Key &key, const std::string &value, size_t at, std::vector<GemmShape> &out) {
    const std::string what = "BATCHxMxNxK:efficiency entries of positive whole sizes";
    return entries(
        key, value, at, what,
        [&](const std::string &left, double eff, size_t col, const std::string &word) {
          double dims[4] = {0, 0, 0, 0};
          size_t p = 0, got = 0;
          while (got < 4 && readNumber(left, p, dims[got]) && dims[got] >= 1 &&
                 dims[got] == std::floor(dims[got])) {
            ++got;
            if (got < 4 && (p >= left.size() || left[p++] != 'x'))
              break;
          }
          if (got != 4 || p != left.size())
            return fail(col, std::string(key.name) + " needs " + what + ", not '" + word + "'");
          GemmShape s{dims[0], dims[1], dims[2], dims[3], eff};
          for (const GemmShape &o : out)
            if (o.batch == s.batch && o.m == s.m && o.n == s.n && o.k == s.k)
              return fail(col, std::string(key.name) + ": the shape '" + left + "' is given twice");
          out.push_back(s);
          return true;
        });
  }
};

std::string trim(const std::string &s, size_t &offset) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) {
    offset = s.size();
    return "";
  }
  size_t e = s.find_last_not_of(" \t\r");
  offset = b;
  return s.substr(b, e - b + 1);
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

} // namespace

bool parseCluster(const std::string &text, const std::string &file, Cluster &out,
                  std::string &error) {
  Cluster c;
  Parser p{file, error};
  std::map<std::string, int> seen; // key -> line
  std::istringstream lines(text);
  std::string raw;
  while (std::getline(lines, raw)) {
    ++p.line;
    // A '#' outside quotes starts a comment.
    bool quoted = false;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '"')
        quoted = !quoted;
      if (raw[i] == '#' && !quoted) {
        raw.resize(i);
        break;
      }
    }
    size_t keyAt = 0;
    std::string content = trim(raw, keyAt);
    if (content.empty())
      continue;
    size_t eq = raw.find('=');
    if (eq == std::string::npos)
      return p.fail(keyAt, "expected 'key = value'");
    size_t unused = 0, valueAt = 0;
    std::string key = trim(raw.substr(0, eq), unused);
    std::string value = trim(raw.substr(eq + 1), valueAt);
    valueAt += eq + 1;
    const Key *k = std::find_if(std::begin(kKeys), std::end(kKeys),
                                [&](const Key &k) { return key == k.name; });
    if (k == std::end(kKeys))
      return p.fail(keyAt, "unknown key '" + key + "'");
    if (seen.count(key))
      return p.fail(keyAt, "'" + key + "' is given twice (first on line " +
                               std::to_string(seen[key]) + ")");
    seen[key] = p.line;
    if (value.empty())
      return p.fail(valueAt, "'" + key + "' has no value");
    double x = 0;
    switch (k->quantity) {
    case Quantity::Name:
      if (value.size() < 2 || value.front() != '"' || value.back() != '"')
        return p.fail(valueAt, key + " needs a quoted string");
      (key == "name" ? c.name : c.device) = value.substr(1, value.size() - 2);
      continue;
    case Quantity::Count: {
      char *end = nullptr;
      long long n = std::strtoll(value.c_str(), &end, 10);
      if (*end || n <= 0)
        return p.fail(valueAt, key + " needs a positive integer, not '" + value + "'");
      c.perNode = n;
      continue;
    }
    case Quantity::Word:
      if (key == "recompute.replay") {
        if (value != "needed" && value != "layer")
          return p.fail(valueAt, key + " is 'needed' or 'layer', not '" + value + "'");
        c.replayWholeLayer = value == "layer";
        continue;
      }
      if (value != "fused" && value != "unfused")
        return p.fail(valueAt, key + " is 'fused' or 'unfused', not '" + value + "'");
      c.unfusedAttention = value == "unfused";
      continue;
    case Quantity::Shapes:
      if (!p.shapes(*k, value, valueAt, c.gemmShapes))
        return false;
      continue;
    case Quantity::Table: {
      EfficiencyTable t;
      if (!p.table(*k, value, valueAt, t))
        return false;
      (key == "efficiency.gemm" ? c.gemm : c.attention) = t;
      continue;
    }
    default:
      if (!p.quantity(*k, value, valueAt, x))
        return false;
    }
    if (key == "accelerator.bf16")
      c.peak16 = x;
    else if (key == "accelerator.fp32")
      c.peak32 = x;
    else if (key == "accelerator.memory")
      c.memory = x;
    else if (key == "accelerator.bandwidth")
      c.memoryBandwidth = x;
    else if (key == "intra.bandwidth")
      c.intra.bandwidth = x;
    else if (key == "intra.latency")
      c.intra.latency = x;
    else if (key == "inter.bandwidth")
      c.inter.bandwidth = x;
    else if (key == "inter.latency")
      c.inter.latency = x;
    else if (key == "stash.bandwidth")
      c.stashBandwidth = x;
    else if (key == "efficiency.memory")
      c.memoryEfficiency = x;
    else if (key == "overhead.kernel")
      c.kernelOverhead = x;
    else if (key == "overhead.collective")
      c.collectiveOverhead = x;
  }
  for (const Key &k : kKeys)
    if (k.required && !seen.count(k.name)) {
      ++p.line;
      return p.fail(0, std::string("missing '") + k.name + "'");
    }
  out = c;
  return true;
}

std::string formatCluster(const Cluster &c, const std::string &header) {
  std::ostringstream os;
  std::istringstream lines(header);
  std::string line;
  while (std::getline(lines, line))
    os << "# " << line << "\n";
  auto table = [](const EfficiencyTable &t) {
    std::string s;
    for (auto [size, eff] : t.points)
      s += (s.empty() ? "" : " ") + number(size) + ":" + number(eff);
    return s;
  };
  auto shapes = [](const std::vector<GemmShape> &all) {
    auto whole = [](double x) { return std::to_string(static_cast<long long>(x)); };
    std::string s;
    for (const GemmShape &g : all)
      s += (s.empty() ? "" : " ") + whole(g.batch) + "x" + whole(g.m) + "x" + whole(g.n) + "x" +
           whole(g.k) + ":" + number(g.efficiency);
    return s;
  };
  os << "name = \"" << c.name << "\"\n"
     << (c.device.empty() ? "" : "accelerator.device = \"" + c.device + "\"\n")
     << "accelerator.bf16 = " << number(c.peak16 / 1e9) << " GFLOP/s\n"
     << "accelerator.fp32 = " << number(c.peak32 / 1e9) << " GFLOP/s\n"
     << "accelerator.memory = " << number(c.memory / 1073741824.0) << " GiB\n"
     << "accelerator.bandwidth = " << number(c.memoryBandwidth / 1e9) << " GB/s\n"
     << "node.accelerators = " << c.perNode << "\n"
     << "intra.bandwidth = " << number(c.intra.bandwidth / 1e9) << " GB/s\n"
     << "intra.latency = " << number(c.intra.latency * 1e6) << " us\n"
     << "inter.bandwidth = " << number(c.inter.bandwidth / 1e9) << " GB/s\n"
     << "inter.latency = " << number(c.inter.latency * 1e6) << " us\n"
     << "efficiency.gemm = " << table(c.gemm) << "\n"
     << (c.gemmShapes.empty() ? "" : "efficiency.gemm.shapes = " + shapes(c.gemmShapes) + "\n")
     << "efficiency.attention = " << table(c.attention) << "\n"
     << "efficiency.memory = " << number(c.memoryEfficiency) << "\n"
     << (c.unfusedAttention ? "attention.kernel = unfused\n" : "")
     << (c.replayWholeLayer ? "recompute.replay = layer\n" : "")
     << (c.stashBandwidth > 0 ? "stash.bandwidth = " + number(c.stashBandwidth / 1e9) + " GB/s\n"
                              : "")
     << "overhead.kernel = " << number(c.kernelOverhead * 1e6) << " us\n"
     << "overhead.collective = " << number(c.collectiveOverhead * 1e6) << " us\n";
  return os.str();
}

} // namespace tessel::cluster
