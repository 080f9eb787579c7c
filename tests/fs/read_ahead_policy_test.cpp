// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <random>

#include "fs/read_ahead_policy.h"

using lazycache::fs::FileRange;
using lazycache::fs::ReadAheadConfig;
using lazycache::fs::ReadAheadPolicy;

TEST_CASE("sequential reads grow the window up to its maximum", "[unit]") {
  ReadAheadConfig cfg{.initial_window_bytes = 1 << 20, .max_window_bytes = 8 << 20, .seek_tolerance_bytes = 256 << 10};
  ReadAheadPolicy p(cfg);
  const uint64_t size = 1ull << 30;
  uint64_t requested_until = 0, last_len = 0;
  for (uint64_t off = 0; off < (64ull << 20); off += 128 << 10) {
    FileRange r = p.on_read(off, 128 << 10, size);
    if (r.length == 0) continue;
    CHECK(r.offset >= requested_until);  // never asks twice for the same bytes
    requested_until = r.offset + r.length;
    last_len = r.length;
  }
  CHECK(p.window_bytes() == cfg.max_window_bytes);
  CHECK(requested_until > (64ull << 20));  // stays ahead of the reader
  CHECK(last_len <= cfg.max_window_bytes);
}

TEST_CASE("a random read resets the window and fetches nothing ahead", "[unit]") {
  ReadAheadPolicy p;
  const uint64_t size = 1ull << 30;
  for (uint64_t off = 0; off < (8ull << 20); off += 128 << 10) (void)p.on_read(off, 128 << 10, size);
  CHECK(p.window_bytes() > ReadAheadConfig{}.initial_window_bytes);
  FileRange r = p.on_read(500ull << 20, 4096, size);
  CHECK(r.length == 0);
  CHECK(p.window_bytes() == ReadAheadConfig{}.initial_window_bytes);
  // The first read of a file not at offset 0 is not sequential either.
  ReadAheadPolicy q;
  CHECK(q.on_read(1 << 20, 4096, size).length == 0);
}

TEST_CASE("readahead stops at the end of the file", "[unit]") {
  ReadAheadPolicy p;
  const uint64_t size = 3 << 20;
  for (uint64_t off = 0; off < size; off += 64 << 10) {
    FileRange r = p.on_read(off, 64 << 10, size);
    CHECK(r.offset + r.length <= size);
  }
  CHECK(p.on_read(0, 10, 10).offset + p.on_read(0, 10, 10).length <= 10);
}

TEST_CASE("random access patterns: ranges stay inside the file and never overlap while sequential", "[unit]") {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 200; ++trial) {
    const uint64_t size = 1 + rng() % (256ull << 20);
    ReadAheadPolicy p;
    uint64_t until = 0;
    uint64_t off = 0;
    for (int i = 0; i < 200; ++i) {
      const uint64_t len = 1 + rng() % (1 << 20);
      if (rng() % 8 == 0) {  // a seek: earlier readahead may be asked for again
        off = rng() % size;
        until = 0;
      }
      FileRange r = p.on_read(off, len, size);
      if (r.length > 0) {
        REQUIRE(r.offset + r.length <= size);
        REQUIRE(r.offset >= off);
        REQUIRE(r.offset >= until);
        until = r.offset + r.length;
      }
      off = std::min(size, off + len);
      if (off >= size) {
        off = 0;
        until = 0;
      }
    }
  }
}
