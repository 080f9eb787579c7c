// SPDX-License-Identifier: MIT
// File: format/hashing.h -- the two hashes of the format: XXH3-128 (frame and content digests)
// and the low 32 bits of XXH64 seed 0 (seek-table checksums), over xxHash 0.8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "format/archive.h"

namespace lazycache::format {

Digest128 xxh3_128(std::span<const std::byte> bytes);
uint32_t xxh64_low32(std::span<const std::byte> bytes);
uint64_t xxh3_64(std::span<const std::byte> bytes);

// Streaming XXH3-128 for file contents. Not thread-safe.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(std::span<const std::byte> bytes);
  Digest128 digest() const;
  void reset();  // back to the empty input

 private:
  void* state_;
};

}  // namespace lazycache::format
