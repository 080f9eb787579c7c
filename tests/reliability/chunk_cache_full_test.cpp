// SPDX-License-Identifier: MIT
// The chunk cache on a full disk (issue 7): it keeps a free-space floor by evicting its own
// oldest chunks, pauses writes with one warning when it cannot make room or a write fails, skips
// writes while paused (nothing touches the disk), retries with a growing pause, and says when
// caching resumes. The free space and the clock are injected (ChunkCacheConfig), so no root and
// no small filesystem are needed here; cache_disk_full_test does it for real on a tmpfs.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/hashing.h"
#include "fs/cache_write_backoff.h"
#include "fs/chunk_cache.h"
#include "fs/local_files.h"

namespace lazycache::fs {
namespace {

using Clock = CacheWriteBackoff::Clock;
using std::chrono::seconds;

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/lc-cache-full-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path.c_str());
  }
};

std::string chunk(uint64_t i, size_t size = 10000) {
  std::string s(size, '\0');
  uint64_t x = i * 0x9E3779B97F4A7C15ull + 1;
  for (auto& c : s) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  return s;
}
std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }
Digest128 digest_of(const std::string& s) { return format::xxh3_128(bytes_of(s)); }

// Bytes in the cache's blob and temp files: what the cache itself puts on "the disk".
uint64_t blob_bytes(const std::string& dir) {
  auto files_in = [](const std::string& d) {
    uint64_t n = 0;
    for (const auto& name : list_dir(d)) {
      struct stat st;
      if (::stat((d + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) n += static_cast<uint64_t>(st.st_size);
    }
    return n;
  };
  uint64_t n = files_in(dir + "/tmp");
  for (const auto& sub : list_dir(dir + "/blobs")) n += files_in(dir + "/blobs/" + sub);
  return n;
}

// A cache whose disk, clock and warnings the test controls.
struct Rig {
  TempDir dir;
  std::mutex mu;
  std::vector<std::string> warnings;
  Clock::time_point now = Clock::now();
  std::atomic<int64_t> capacity{-1};  // >= 0: free = capacity - blob bytes
  std::atomic<uint64_t> fixed_free{0};
  std::shared_ptr<ChunkCache> cache;

  explicit Rig(uint64_t min_free, uint64_t max_bytes = 1ull << 30) {
    ChunkCacheConfig c;
    c.dir = dir.path;
    c.max_bytes = max_bytes;
    c.min_free_bytes = min_free;
    c.warn = [this](const std::string& line) {
      std::lock_guard lock(mu);
      warnings.push_back(line);
    };
    c.now = [this] { return now; };
    c.free_bytes = [this]() -> Result<uint64_t> {
      const int64_t cap = capacity.load();
      if (cap < 0) return fixed_free.load();
      const uint64_t used = blob_bytes(dir.path);
      return used >= static_cast<uint64_t>(cap) ? 0 : static_cast<uint64_t>(cap) - used;
    };
    auto opened = ChunkCache::open(c);
    INFO((opened.ok() ? std::string() : opened.error().to_string()));
    REQUIRE(opened.ok());
    cache = *opened;
  }
  size_t count(const std::string& needle) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (const auto& w : warnings) n += w.find(needle) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string all() {
    std::lock_guard lock(mu);
    std::string s;
    for (const auto& w : warnings) s += w + "\n";
    return s;
  }
};

TEST_CASE("CacheWriteBackoff: 30 s, doubling to 5 min, one start per episode", "[unit]") {
  CacheWriteBackoff b;
  const Clock::time_point t0{};
  CHECK_FALSE(b.paused(t0));
  CHECK(b.failed(t0));  // starts an episode: the caller warns
  CHECK(b.paused(t0 + seconds(29)));
  CHECK_FALSE(b.paused(t0 + seconds(30)));
  CHECK_FALSE(b.failed(t0 + seconds(30)));  // the retry failed: no second warning
  CHECK(b.paused_until() == t0 + seconds(90));
  Clock::time_point t = t0 + seconds(90);
  Clock::duration pause{};
  for (int i = 0; i < 10; ++i) {
    CHECK_FALSE(b.failed(t));
    pause = b.paused_until() - t;
    CHECK(pause <= std::chrono::minutes(5));
    t = b.paused_until();
  }
  CHECK(pause == std::chrono::minutes(5));  // capped
  CHECK(b.succeeded());                     // ends the episode: the caller says so
  CHECK_FALSE(b.succeeded());
  CHECK_FALSE(b.paused(t));
  CHECK(b.failed(t));  // a new episode warns again
  b.reset();
  CHECK_FALSE(b.paused(t));
}

TEST_CASE("a disk full of other files pauses caching with one warning and no disk writes", "[unit]") {
  Rig rig(1 << 20);
  rig.fixed_free = 0;
  const std::string a = chunk(1), b = chunk(2), c = chunk(3);
  Status s = rig.cache->put(digest_of(a), bytes_of(a));
  CHECK(s.code() == ErrorCode::kResourceExhausted);
  INFO(rig.all());
  REQUIRE(rig.count("cannot store frames") == 1);
  CHECK(rig.count(rig.cache->dir()) == 1);                  // names the directory
  CHECK(rig.count("must stay free for other files") == 1);  // and the reason
  CHECK(rig.cache->writes_paused());
  for (int i = 0; i < 50; ++i) {
    const std::string x = chunk(100 + static_cast<uint64_t>(i));
    CHECK(rig.cache->put(digest_of(x), bytes_of(x)).code() == ErrorCode::kResourceExhausted);
  }
  CHECK(rig.cache->writes_skipped() == 50);
  CHECK(rig.warnings.size() == 1);
  CHECK(blob_bytes(rig.cache->dir()) == 0);  // nothing written, not even a temp file

  // After the pause the write is tried again; it fails again (the disk is still full): no second
  // warning, and the next pause is longer (60 s).
  rig.now += seconds(31);
  CHECK(rig.cache->put(digest_of(b), bytes_of(b)).code() == ErrorCode::kResourceExhausted);
  CHECK(rig.warnings.size() == 1);
  rig.now += seconds(59);
  CHECK(rig.cache->writes_paused());
  rig.now += seconds(2);
  CHECK_FALSE(rig.cache->writes_paused());

  // Room again: the next write stores and says caching resumed, once.
  rig.fixed_free = 100ull << 20;
  REQUIRE(rig.cache->put(digest_of(c), bytes_of(c)).ok());
  CHECK(rig.cache->contains(digest_of(c)));
  CHECK(rig.count("caching resumed") == 1);
  REQUIRE(rig.cache->put(digest_of(b), bytes_of(b)).ok());
  CHECK(rig.warnings.size() == 2);
  auto got = rig.cache->get(digest_of(c));
  REQUIRE(got.ok());
  CHECK(*got == c);
}

TEST_CASE("a nearly full disk: older chunks are evicted to keep the floor, with one warning", "[unit]") {
  const uint64_t capacity = 200000, floor = 50000;  // room for 15 chunks of 10,000 bytes
  Rig rig(floor);
  rig.capacity = static_cast<int64_t>(capacity);
  uint64_t peak = 0;
  for (uint64_t i = 0; i < 60; ++i) {
    const std::string x = chunk(i);
    Status s = rig.cache->put(digest_of(x), bytes_of(x));
    INFO(s.to_string() << "\n" << rig.all());
    REQUIRE(s.ok());
    peak = std::max(peak, blob_bytes(rig.cache->dir()));
  }
  INFO(rig.all());
  CHECK(peak <= capacity - floor);  // the floor held after every write
  CHECK(rig.count("evicting older chunks") == 1);
  CHECK(rig.count(rig.cache->dir()) == 1);
  CHECK(rig.warnings.size() == 1);
  CHECK_FALSE(rig.cache->writes_paused());
  CHECK(rig.cache->floor_evictions() >= 40);
  CHECK(rig.cache->contains(digest_of(chunk(59))));  // the newest is kept, the oldest went
  CHECK_FALSE(rig.cache->contains(digest_of(chunk(0))));
  auto st = rig.cache->stats();
  REQUIRE(st.ok());
  CHECK(st->total_bytes == blob_bytes(rig.cache->dir()));  // rows and files agree
}

// Seen in cache_disk_full_test (CI): fetch threads storing at once near the floor paused caching
// for 30 s with "0 B free ... the cache holds only 0 B to evict". Blobs being written, or renamed
// into place but not yet indexed, take room that eviction cannot free yet: the cache must skip
// such a frame, not take it for a disk full of other files.
TEST_CASE("fetch threads storing at once near the floor skip frames but never pause caching", "[unit]") {
  const uint64_t floor = 50000;
  for (int round = 0; round < 10; ++round) {
    Rig rig(floor);
    rig.capacity = static_cast<int64_t>(floor + 25000);  // room for two chunks of 10,000 bytes
    std::vector<std::thread> threads;
    for (uint64_t t = 0; t < 8; ++t) {
      threads.emplace_back([&rig, t, round] {
        for (uint64_t i = 0; i < 30; ++i) {
          const std::string x = chunk(static_cast<uint64_t>(round) * 1000 + t * 100 + i);
          (void)rig.cache->put(digest_of(x), bytes_of(x));  // a skipped frame is fine; a pause is not
        }
      });
    }
    for (auto& th : threads) th.join();
    INFO("round " << round << "\n" << rig.all());
    CHECK(rig.count("cannot store frames") == 0);
    CHECK_FALSE(rig.cache->writes_paused());
    auto st = rig.cache->stats();
    REQUIRE(st.ok());
    CHECK(st->total_bytes == blob_bytes(rig.cache->dir()));  // rows and files agree
    CHECK(st->total_bytes > 0);
  }
}

TEST_CASE("a failing blob write pauses caching once and leaves no temp file", "[unit]") {
  Rig rig(0);
  rig.fixed_free = 1ull << 40;
  // tmp/ replaced by a file: every blob write fails (as ENOSPC would, but without root).
  const std::string tmp = rig.cache->dir() + "/tmp";
  REQUIRE(::rmdir(tmp.c_str()) == 0);
  REQUIRE(write_new_file(tmp, bytes_of(std::string("x"))).ok());
  const std::string a = chunk(1), b = chunk(2);
  Status s = rig.cache->put(digest_of(a), bytes_of(a));
  REQUIRE_FALSE(s.ok());
  INFO(rig.all());
  CHECK(rig.count("cannot store frames") == 1);
  CHECK(rig.count(tmp) == 1);  // the reason names the path that failed
  CHECK(rig.cache->put(digest_of(b), bytes_of(b)).code() == ErrorCode::kResourceExhausted);
  CHECK(rig.cache->writes_skipped() == 1);
  // Fixed, and the pause over: caching resumes.
  REQUIRE(::unlink(tmp.c_str()) == 0);
  REQUIRE(make_dirs(tmp).ok());
  rig.now += seconds(31);
  REQUIRE(rig.cache->put(digest_of(b), bytes_of(b)).ok());
  CHECK(rig.count("caching resumed") == 1);
  CHECK_FALSE(rig.cache->contains(digest_of(a)));
  CHECK(rig.cache->contains(digest_of(b)));
}

TEST_CASE("clearing the cache ends a pause at once", "[unit]") {
  Rig rig(1 << 20);
  rig.fixed_free = 0;
  const std::string a = chunk(1);
  CHECK_FALSE(rig.cache->put(digest_of(a), bytes_of(a)).ok());
  CHECK(rig.cache->writes_paused());
  REQUIRE(rig.cache->clear().ok());
  CHECK_FALSE(rig.cache->writes_paused());
}

TEST_CASE("the LMDB lock file is allocated before LMDB maps it", "[unit]") {
  Rig rig(0);
  struct stat st;
  REQUIRE(::stat((rig.cache->dir() + "/index.mdb-lock").c_str(), &st) == 0);
  CHECK(st.st_size >= 1024 * 64);
  // Every byte has a block: a write through LMDB's shared mapping cannot be SIGBUS on a full disk.
  CHECK(static_cast<uint64_t>(st.st_blocks) * 512 >= static_cast<uint64_t>(st.st_size));
}

}  // namespace
}  // namespace lazycache::fs
