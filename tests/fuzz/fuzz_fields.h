// SPDX-License-Identifier: MIT
// File: tests/fuzz/fuzz_fields.h -- splits a fuzz input into NUL-separated text fields, for the
// targets that take several strings (a request, a config file and its environment). NUL is the
// separator because none of those strings can hold one (C strings, environment variables), so
// the seeds stay readable text (written with printf '%b' in make_corpus.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lazycache::fuzz {

class Fields {
 public:
  Fields(const uint8_t* data, size_t size) : raw_(reinterpret_cast<const char*>(data), size) {
    size_t start = 0;
    for (;;) {
      size_t nul = raw_.find('\0', start);
      parts_.push_back(raw_.substr(start, nul == std::string_view::npos ? std::string_view::npos : nul - start));
      if (nul == std::string_view::npos) break;
      start = nul + 1;
    }
  }
  // Field i, or "" past the end: every input, however short, is a complete request.
  std::string get(size_t i) const { return i < parts_.size() ? std::string(parts_[i]) : std::string(); }
  size_t size() const { return parts_.size(); }
  // Everything after the first `n` separators, NULs included ("" when there are fewer).
  std::string_view rest_after(size_t n) const {
    size_t pos = 0;
    for (size_t i = 0; i < n; ++i) {
      pos = raw_.find('\0', pos);
      if (pos == std::string_view::npos) return {};
      ++pos;
    }
    return raw_.substr(pos);
  }
  std::string_view raw() const { return raw_; }

 private:
  std::string_view raw_;
  std::vector<std::string_view> parts_;
};

// A number from a decimal field (garbage and overflow give 0): lets seeds state sizes readably.
inline uint64_t to_u64(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    if (v > (UINT64_MAX - 9) / 10) return 0;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace lazycache::fuzz
