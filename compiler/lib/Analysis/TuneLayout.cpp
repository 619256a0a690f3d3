//===- TuneLayout.cpp - The model and the layouts tessel tune weighs ------===//
//
// What the layout search starts from: a transformer's shape read off a compiled plan, and the
// layouts themselves (their micro-batch count, their one-line description, and the words
// `tessel tune --layout` and `tessel estimate` read them from).
//
//===----------------------------------------------------------------------===//

#include "tessel/Analysis/Tune.h"

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace tessel;
namespace pf = tessel::planfile;
namespace cl = tessel::cluster;

bool tessel::readTransformerShape(const pf::Plan &plan, double parameters, TransformerShape &out,
                                  std::string &error) {
  TransformerShape s;
  s.model = plan.model;
  s.parameters = parameters;
  auto number = [&](const std::string &name, double &value, bool required) {
    if (const pf::Attr *a = plan.findConfig(name)) {
      if (auto n = std::get_if<int64_t>(&a->value)) {
        value = static_cast<double>(*n);
        return true;
      }
    }
    if (required)
      error = "tune reads the transformer's shape from the dims embed, heads, head, ffn, seq and "
              "vocab, the layers and train.batch; the model has no '" +
              name + "'";
    return !required;
  };
  if (!number("dims.embed", s.hidden, true) || !number("dims.heads", s.heads, true) ||
      !number("dims.head", s.head, true) || !number("dims.ffn", s.ffn, true) ||
      !number("dims.seq", s.seq, true) || !number("dims.vocab", s.vocab, true) ||
      !number("layers", s.layers, true) || !number("train.batch", s.batch, true))
    return false;
  s.kvHeads = s.heads;
  number("dims.kv_heads", s.kvHeads, false);
  if (const pf::Attr *p = plan.findConfig("train.precision"))
    if (auto name = std::get_if<std::string>(&p->value))
      s.elementBytes = *name == "fp32" ? 4 : 2;
  // GELU MLPs have two matrices of hidden × ffn, gated ones three: whichever the parameters
  // per layer say.
  double attention = s.hidden * (s.heads + 2 * s.kvHeads) * s.head + s.heads * s.head * s.hidden;
  double perLayer = (parameters - s.vocab * s.hidden) / s.layers;
  s.mlpMatrices = std::round((perLayer - attention) / (s.hidden * s.ffn)) >= 3 ? 3 : 2;
  out = s;
  return true;
}

int64_t Layout::microbatches(const TransformerShape &s) const {
  return static_cast<int64_t>(s.batch) / (static_cast<int64_t>(dp) * microBatch);
}

std::string Layout::describe() const {
  std::ostringstream os;
  os << "dp=" << dp << " tp=" << tp << " pp=" << pp << " cp=" << cp;
  if (pp > 1)
    os << " " << pipeline::scheduleKindName(schedule);
  if (virtualStages > 1)
    os << " v=" << virtualStages;
  os << (sp ? " sp" : "") << " zero=" << zero << " mb=" << microBatch << " recompute=" << recompute;
  return os.str();
}

bool tessel::parseLayout(const std::string &text, Layout &out, std::string &error) {
  Layout l;
  std::string spaced = text;
  std::replace(spaced.begin(), spaced.end(), ',', ' ');
  std::istringstream words(spaced);
  std::string w;
  while (words >> w) {
    size_t eq = w.find('=');
    std::string key = w.substr(0, eq), value = eq == std::string::npos ? "" : w.substr(eq + 1);
    auto integer = [&](int &field) {
      char *end = nullptr;
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || n < (key == "zero" ? 0 : 1)) {
        error = "'" + w + "' needs " + (key == "zero" ? "0 to 3" : "a positive integer");
        return false;
      }
      field = static_cast<int>(n);
      return true;
    };
    bool ok = true;
    if (key == "dp")
      ok = integer(l.dp);
    else if (key == "tp")
      ok = integer(l.tp);
    else if (key == "pp")
      ok = integer(l.pp);
    else if (key == "cp")
      ok = integer(l.cp);
    else if (key == "v")
      ok = integer(l.virtualStages);
    else if (key == "mb")
      ok = integer(l.microBatch);
    else if (key == "zero")
      ok = integer(l.zero) && l.zero <= 3;
    else if (key == "sp" && value.empty())
      l.sp = true;
    else if (key == "recompute" && (value == "none" || value == "selective" || value == "full"))
      l.recompute = value;
    else if (value.empty() && pipeline::parseScheduleKind(key, l.schedule)) {
      // A schedule's name, which parseScheduleKind has stored.
    } else {
      error = "unknown layout word '" + w +
              "' (dp= tp= pp= cp= v= mb= zero= sp recompute=none|selective|full, a schedule)";
      return false;
    }
    if (!ok) {
      if (error.empty())
        error = "'" + w + "' is out of range";
      return false;
    }
  }
  out = l;
  return true;
}
