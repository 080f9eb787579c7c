// SPDX-License-Identifier: MIT
// File: remote/testing/ramp.h -- self-checking test data: byte(o) = (seed + o) % 251.
// 251 is prime and not a power of two, so a shifted, repeated or misplaced range of any power-of-two
// length never matches the expected bytes by accident; any read can be verified without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace lazycache::remote::testing {

inline std::byte ramp_byte(uint64_t seed, uint64_t offset) { return static_cast<std::byte>((seed + offset) % 251); }

// `length` ramp bytes starting at `offset`.
inline std::string ramp_bytes(uint64_t seed, uint64_t offset, size_t length) {
  std::string s(length, '\0');
  for (size_t i = 0; i < length; ++i) s[i] = static_cast<char>(ramp_byte(seed, offset + i));
  return s;
}

// Index of the first byte of `got` (read from `offset`) that is not ramp data, or -1 if all match.
inline int64_t first_ramp_mismatch(uint64_t seed, uint64_t offset, std::span<const std::byte> got) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != ramp_byte(seed, offset + i)) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace lazycache::remote::testing
