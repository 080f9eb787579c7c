// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include "fs/chunk_cache.h"
#include "fs/local_files.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::fs::ChunkCache;
using lazycache::testing::digest_of;
using lazycache::testing::pattern;
using lazycache::testing::TempDir;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

std::string chunk(uint64_t i, size_t size = 10000) { return pattern(size, i + 1); }

}  // namespace

TEST_CASE("chunk cache stores, verifies and persists chunks", "[unit]") {
  TempDir dir;
  const std::string a = chunk(1), b = chunk(2, 50000);
  {
    auto cache = ChunkCache::open({dir.path(), 1 << 20});
    REQUIRE(cache.ok());
    CHECK((*cache)->get(digest_of(a)).error().code() == ErrorCode::kNotFound);
    REQUIRE((*cache)->put(digest_of(a), bytes_of(a)).ok());
    REQUIRE((*cache)->put(digest_of(b), bytes_of(b)).ok());
    REQUIRE((*cache)->put(digest_of(b), bytes_of(b)).ok());  // stored once
    auto got = (*cache)->get(digest_of(a));
    REQUIRE(got.ok());
    CHECK(*got == a);
    auto st = (*cache)->stats();
    REQUIRE(st.ok());
    CHECK(st->chunk_count == 2);
    CHECK(st->total_bytes == a.size() + b.size());
  }
  // A new instance (as another job would open it) sees the same chunks.
  auto again = ChunkCache::open({dir.path(), 1 << 20});
  REQUIRE(again.ok());
  auto got = (*again)->get(digest_of(b));
  REQUIRE(got.ok());
  CHECK(*got == b);
}

TEST_CASE("a damaged or missing blob is a miss that removes the entry, never wrong bytes", "[unit]") {
  TempDir dir;
  auto cache = ChunkCache::open({dir.path(), 1 << 20});
  REQUIRE(cache.ok());
  const std::string a = chunk(3), b = chunk(4);
  REQUIRE((*cache)->put(digest_of(a), bytes_of(a)).ok());
  REQUIRE((*cache)->put(digest_of(b), bytes_of(b)).ok());
  const std::string hex = fs::digest_hex(digest_of(a));
  const std::string blob = dir.path() + "/blobs/" + hex.substr(0, 2) + "/" + hex;
  std::string damaged = a;
  damaged[5000] ^= 1;
  ::unlink(blob.c_str());
  REQUIRE(fs::write_new_file(blob, bytes_of(damaged)).ok());
  auto bad = (*cache)->get(digest_of(a));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == ErrorCode::kCorrupt);  // damaged: callers count and log it
  CHECK(bad.error().message().find(blob) != std::string::npos);
  CHECK((*cache)->corrupt_removed() == 1);
  CHECK_FALSE((*cache)->contains(digest_of(a)));
  // Deleted behind the cache's back.
  const std::string hb = fs::digest_hex(digest_of(b));
  ::unlink((dir.path() + "/blobs/" + hb.substr(0, 2) + "/" + hb).c_str());
  CHECK((*cache)->get(digest_of(b)).error().code() == ErrorCode::kNotFound);
  CHECK((*cache)->stats()->chunk_count == 0);
  CHECK((*cache)->stats()->total_bytes == 0);
}

TEST_CASE("the cache stays within its bound under churn and evicts the least recently used", "[unit]") {
  TempDir dir;
  const uint64_t bound = 200000;  // 20 chunks of 10,000 bytes
  auto cache = ChunkCache::open({dir.path(), bound});
  REQUIRE(cache.ok());
  const std::string keep = chunk(1000);
  REQUIRE((*cache)->put(digest_of(keep), bytes_of(keep)).ok());
  for (uint64_t i = 0; i < 100; ++i) {  // 5x the bound
    const std::string c = chunk(i);
    REQUIRE((*cache)->put(digest_of(c), bytes_of(c)).ok());
    if (i % 5 == 0) REQUIRE((*cache)->get(digest_of(keep)).ok());  // kept young
    REQUIRE((*cache)->flush().ok());
    auto st = (*cache)->stats();
    REQUIRE(st->total_bytes <= bound);
  }
  CHECK((*cache)->contains(digest_of(keep)));
  CHECK_FALSE((*cache)->contains(digest_of(chunk(0))));  // oldest, unused: evicted
  CHECK((*cache)->contains(digest_of(chunk(99))));
  // Blob files on disk match the index: eviction unlinks them.
  size_t files = 0;
  for (const auto& sub : fs::list_dir(dir.path() + "/blobs")) files += fs::list_dir(dir.path() + "/blobs/" + sub).size();
  CHECK(files == (*cache)->stats()->chunk_count);
}

TEST_CASE("gc removes orphan blobs and dangling rows; clear empties the cache", "[unit]") {
  TempDir dir;
  auto cache = ChunkCache::open({dir.path(), 1 << 20});
  REQUIRE(cache.ok());
  const std::string a = chunk(7), orphan = chunk(8);
  REQUIRE((*cache)->put(digest_of(a), bytes_of(a)).ok());
  // A blob renamed into place by a process killed before it inserted the row, an hour ago.
  const std::string ho = fs::digest_hex(digest_of(orphan));
  const std::string opath = dir.path() + "/blobs/" + ho.substr(0, 2) + "/" + ho;
  REQUIRE(fs::write_new_file(opath, bytes_of(orphan)).ok());
  testing::set_mtime(opath, time(nullptr) - 3600, 0);
  auto report = (*cache)->gc();
  REQUIRE(report.ok());
  CHECK(report->orphan_files_removed == 1);
  CHECK(::access(opath.c_str(), F_OK) != 0);
  CHECK((*cache)->contains(digest_of(a)));
  REQUIRE((*cache)->clear().ok());
  CHECK((*cache)->stats()->chunk_count == 0);
  CHECK_FALSE((*cache)->get(digest_of(a)).ok());
}

TEST_CASE("kill -9 of a writer at random points leaves a usable cache", "[unit]") {
  TempDir dir;
  std::mt19937 rng(7);
  const uint64_t bound = 400000;
  for (int round = 0; round < 4; ++round) {
    int progress[2];
    REQUIRE(::pipe(progress) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(progress[0]);
      auto cache = ChunkCache::open({dir.path(), bound});
      if (!cache.ok()) ::_exit(3);
      for (uint64_t i = 0;; ++i) {
        const std::string c = chunk((static_cast<uint64_t>(round) << 32) + i, 5000 + (i % 7) * 3000);
        if (!(*cache)->put(digest_of(c), bytes_of(c)).ok()) ::_exit(4);
        if (i % 3 == 0) (void)(*cache)->get(digest_of(chunk(i / 2, 5000)));
        if (i == 5 && ::write(progress[1], "x", 1) != 1) ::_exit(5);
      }
    }
    ::close(progress[1]);
    char byte;
    REQUIRE(::read(progress[0], &byte, 1) == 1);  // it has written a few chunks: now kill it mid-work
    ::close(progress[0]);
    ::usleep(rng() % 60000);
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));  // it was still writing, not failed
  }
  auto cache = ChunkCache::open({dir.path(), bound});
  REQUIRE(cache.ok());
  auto st = (*cache)->stats();
  REQUIRE(st.ok());
  CHECK(st->chunk_count > 0);
  CHECK(st->total_bytes <= bound);  // eviction commits with the insert
  // Every row that survived serves exactly the bytes of its digest.
  uint64_t hits = 0;
  for (int round = 0; round < 4; ++round) {
    for (uint64_t i = 0; i < 3000; ++i) {
      const std::string c = chunk((static_cast<uint64_t>(round) << 32) + i, 5000 + (i % 7) * 3000);
      auto got = (*cache)->get(digest_of(c));
      if (got.ok()) {
        ++hits;
        REQUIRE(*got == c);
      }
    }
  }
  CHECK(hits > 0);
  REQUIRE((*cache)->gc().ok());
  const std::string fresh = chunk(999999);
  REQUIRE((*cache)->put(digest_of(fresh), bytes_of(fresh)).ok());
  CHECK((*cache)->get(digest_of(fresh)).ok());
}

// Issue 19: an eviction used to unlink its blobs after its commit. A put() of the same digest by
// another process in between (row gone, so it writes and renames the blob again, then inserts
// the row) lost its file to that late unlink: a row without a file. The hook runs the put()
// exactly there.
TEST_CASE("a put of a digest an eviction just removed keeps its file (no row without a blob)", "[unit]") {
  TempDir dir;
  const std::string a = chunk(40), b = chunk(41), c = chunk(42);
  std::shared_ptr<ChunkCache> cache;
  bool in_hook = false;
  fs::ChunkCacheConfig config{dir.path(), 25000};  // room for two chunks of 10,000 bytes
  config.after_evict_commit = [&] {
    if (in_hook) return;
    in_hook = true;
    // The eviction made room for c by evicting a: store a again, as another job would.
    CHECK(cache->put(digest_of(a), bytes_of(a)).ok());
    in_hook = false;
  };
  auto opened = ChunkCache::open(config);
  REQUIRE(opened.ok());
  cache = *opened;
  REQUIRE(cache->put(digest_of(a), bytes_of(a)).ok());
  REQUIRE(cache->put(digest_of(b), bytes_of(b)).ok());
  REQUIRE(cache->put(digest_of(c), bytes_of(c)).ok());  // evicts a; the hook puts it back
  if (cache->contains(digest_of(a))) {
    auto got = cache->get(digest_of(a));
    INFO(got.status().to_string());
    CHECK(got.ok());
  }
  CHECK(cache->corrupt_removed() == 0);
}

// Issue 19: max_bytes_ was written by a second open() (under the registry lock) while evictions
// read it (under none): a data race for TSan (this binary is labelled "concurrency").
TEST_CASE("opening the same cache again while another thread stores chunks", "[unit]") {
  TempDir dir;
  auto cache = ChunkCache::open({dir.path(), 30000});
  REQUIRE(cache.ok());
  std::atomic<int> failed_puts{0};  // Catch2 assertions are for the main thread only
  std::thread writer([&] {
    for (uint64_t i = 0; i < 60; ++i) {
      const std::string bytes = chunk(100 + i, 2000);
      if (!(*cache)->put(digest_of(bytes), bytes_of(bytes)).ok()) ++failed_puts;
    }
  });
  for (uint64_t bound = 30001; bound < 30061; ++bound) {
    auto again = ChunkCache::open({dir.path(), bound});
    REQUIRE(again.ok());
    CHECK(again->get() == cache->get());
  }
  writer.join();
  CHECK(failed_puts == 0);
  CHECK((*cache)->max_bytes() == 30060);
}
