//===- SvgText.cpp - What the SVG pictures share ---------------------------===//

#include "common/support/SvgText.h"

#include <cmath>
#include <cstdio>

namespace tessel::svg {

std::string escapeXml(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      // XML 1.0 allows no control characters other than tab, newline and return.
      if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r')
        out += c;
    }
  }
  return out;
}

std::string number(double value) {
  if (!std::isfinite(value))
    value = 0;
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

double tickStep(double span, int count) {
  double raw = span / count;
  if (!(raw > 0) || !std::isfinite(raw))
    return 1;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0})
    if (factor * power >= raw)
      return factor * power;
  return 10 * power;
}

} // namespace tessel::svg
