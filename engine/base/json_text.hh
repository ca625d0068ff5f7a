// JSON text written by hand (summaries, plans, the control protocol): a
// string as a JSON string literal, escaped.
#pragma once
#include <cstdio>
#include <string>

namespace sluice {

inline std::string json_string(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += c;
  }
  return o + "\"";
}

}  // namespace sluice
