// SPDX-License-Identifier: MIT
#include "format/quote.h"

#include <cstdio>

namespace lazycache::format {

namespace {

void append_escaped(std::string& out, std::string_view s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
}

}  // namespace

std::string quote_path(std::string_view path, size_t max_bytes) {
  std::string out = "'";
  if (path.size() <= max_bytes) {
    append_escaped(out, path);
  } else {
    // The tail names the entry; the head says where it is.
    append_escaped(out, path.substr(0, max_bytes / 4));
    out += "...";
    append_escaped(out, path.substr(path.size() - (max_bytes - max_bytes / 4)));
  }
  out += "'";
  return out;
}

}  // namespace lazycache::format
