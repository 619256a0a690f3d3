//===- JsonString.cpp - JSON string literals ------------------------------===//

#include "common/support/JsonString.h"

#include <cstdio>

namespace tessel {

void appendJsonString(std::string &out, const std::string &value) {
  out += '"';
  for (char c : value) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned char>(c));
        out += buffer;
      } else {
        // Bytes from 0x80 up pass through: UTF-8 stays UTF-8.
        out += c;
      }
    }
  }
  out += '"';
}

} // namespace tessel
