// SPDX-License-Identifier: MIT
#include "format/hashing.h"

#include <xxhash.h>

#include <cstdio>
#include <new>

namespace lazycache::format {

std::string Digest128::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high), static_cast<unsigned long long>(low));
  return buf;
}

Digest128 xxh3_128(std::span<const std::byte> bytes) {
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return Digest128{h.low64, h.high64};
}

uint32_t xxh64_low32(std::span<const std::byte> bytes) { return static_cast<uint32_t>(XXH64(bytes.data(), bytes.size(), 0) & 0xFFFFFFFFu); }

uint64_t xxh3_64(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}
Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }
void Xxh3Stream::update(std::span<const std::byte> bytes) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), bytes.data(), bytes.size());
}
void Xxh3Stream::reset() { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }
Digest128 Xxh3Stream::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return Digest128{h.low64, h.high64};
}

}  // namespace lazycache::format
