// SPDX-License-Identifier: MIT
// File: format/le.h -- little-endian loads and stores for on-disk structures. Disk bytes are
// never reinterpreted as structs; every field goes through these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace lazycache::format {

inline uint16_t load_le16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) | (std::to_integer<uint16_t>(p[1]) << 8));
}
inline uint32_t load_le32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | std::to_integer<uint32_t>(p[i]);
  return v;
}
inline uint64_t load_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
  return v;
}

inline void store_le(std::byte* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

// Appends little-endian integers to a byte string.
inline void put_le16(std::string& out, uint16_t v) {
  char b[2];
  store_le(reinterpret_cast<std::byte*>(b), v, 2);
  out.append(b, 2);
}
inline void put_le32(std::string& out, uint32_t v) {
  char b[4];
  store_le(reinterpret_cast<std::byte*>(b), v, 4);
  out.append(b, 4);
}
inline void put_le64(std::string& out, uint64_t v) {
  char b[8];
  store_le(reinterpret_cast<std::byte*>(b), v, 8);
  out.append(b, 8);
}

inline const std::byte* as_bytes_ptr(const std::string& s) { return reinterpret_cast<const std::byte*>(s.data()); }

}  // namespace lazycache::format
