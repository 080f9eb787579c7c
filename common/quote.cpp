// SPDX-License-Identifier: MIT
#include "common/quote.h"

#include <cstdio>

namespace lazycache {

namespace {

// U+0080..U+009F encoded in UTF-8: 0xc2 then 0x80..0x9f.
bool c1_control_at(std::string_view s, size_t i) {
  return static_cast<unsigned char>(s[i]) == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
         static_cast<unsigned char>(s[i + 1]) <= 0x9f;
}

bool needs_escape(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  return c == '\\' || c == '\'' || c < 0x20 || c == 0x7f || c1_control_at(s, i);
}

void append_hex(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

void append_escaped(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c1_control_at(s, i)) {
      append_hex(out, c);
      append_hex(out, static_cast<unsigned char>(s[++i]));
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      append_hex(out, c);
    } else {
      out += ch;
    }
  }
}

}  // namespace

std::string quote_text(std::string_view text, size_t max_bytes) {
  std::string out = "'";
  if (text.size() <= max_bytes) {
    append_escaped(out, text);
  } else {
    // The tail names the entry; the head says where it is.
    append_escaped(out, text.substr(0, max_bytes / 4));
    out += "...";
    append_escaped(out, text.substr(text.size() - (max_bytes - max_bytes / 4)));
  }
  out += "'";
  return out;
}

std::string quote_text_if_needed(std::string_view text, size_t max_bytes) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (needs_escape(text, i)) return quote_text(text, max_bytes);
  }
  return std::string(text);
}

}  // namespace lazycache
