// SPDX-License-Identifier: MIT
// Idle trimming (FilesystemConfig::idle_trim_ms): after that long without a read the
// decompressed frames held in memory are dropped (MountStats::memory_used_bytes falls to 0),
// later reads still return the right bytes (from the chunk cache, not the store), and a mount
// read more often than that, or with trimming off, keeps its frames.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "fs/filesystem.h"
#include "fs_read_util.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

using Clock = std::chrono::steady_clock;

struct Mounted {
  TempDir dir;
  std::map<std::string, std::string> files;  // archive path -> content
  std::unique_ptr<fs::Filesystem> fs;

  explicit Mounted(uint64_t idle_trim_ms) {
    testing::make_node_like_tree(dir / "t", 30);
    testing::pack_tree(dir.path(), {"t"}, dir / "a.tar.zst");
    for (int p = 0; p < 30; ++p) {
      for (const char* name : {"/index.js", "/lib/util.js"}) {
        const std::string rel = "t/node_modules/pkg-" + std::to_string(p) + name;
        files[rel] = testing::read_file(dir / rel);
      }
    }
    auto source = LocalFileSource::open(dir / "a.tar.zst");
    REQUIRE(source.ok());
    auto reader = format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(source).value()));
    REQUIRE(reader.ok());
    auto cache = fs::ChunkCache::open({dir / "cache", 1ull << 30});
    REQUIRE(cache.ok());
    fs::FilesystemConfig config;
    config.idle_trim_ms = idle_trim_ms;
    fs = std::make_unique<fs::Filesystem>(std::move(reader).value(), *cache, config);
  }

  void read_all_and_check() {
    for (const auto& [path, want] : files) REQUIRE(testing::read_whole(*fs, path) == want);
  }
  // Frames that had to be decompressed again (not served from memory).
  uint64_t frames_loaded() const {
    auto s = fs->stats();
    return s.frames_from_store + s.frames_from_chunk_cache;
  }
};

// Polls memory_used_bytes until it is 0 or `limit` passes (the caller checks which).
void wait_for_empty_memory(const fs::Filesystem& f, std::chrono::milliseconds limit) {
  const auto start = Clock::now();
  while (f.stats().memory_used_bytes > 0 && Clock::now() - start < limit) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace

TEST_CASE("after the idle period the frames in memory are dropped and reads still return the right bytes", "[unit]") {
  Mounted m(300);
  m.read_all_and_check();
  m.fs->wait_prefetch_idle();
  REQUIRE(m.fs->stats().memory_used_bytes > 0);

  wait_for_empty_memory(*m.fs, std::chrono::seconds(10));
  REQUIRE(m.fs->stats().memory_used_bytes == 0);

  const auto before = m.fs->stats();
  m.read_all_and_check();
  const auto after = m.fs->stats();
  CHECK(after.frames_from_chunk_cache > before.frames_from_chunk_cache);  // reloaded, not kept
  CHECK(after.store_range_reads == before.store_range_reads);             // from the local cache
  CHECK(after.memory_used_bytes > 0);
}

TEST_CASE("with trimming off the frames stay in memory", "[unit]") {
  Mounted m(0);
  m.read_all_and_check();
  m.fs->wait_prefetch_idle();
  const uint64_t held = m.fs->stats().memory_used_bytes;
  REQUIRE(held > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // 8 watchdog rounds
  CHECK(m.fs->stats().memory_used_bytes == held);
  const uint64_t loaded = m.frames_loaded();
  m.read_all_and_check();
  CHECK(m.frames_loaded() == loaded);  // every frame served from memory
}

TEST_CASE("reads closer together than the idle period keep the frames in memory", "[unit]") {
  Mounted m(600);
  const std::string path = "t/node_modules/pkg-7/index.js";
  REQUIRE(testing::read_whole(*m.fs, path) == m.files.at(path));
  m.fs->wait_prefetch_idle();
  const uint64_t loaded = m.frames_loaded();
  // Read every 30 ms for three idle periods. The rule holds only if no gap between reads came
  // near the idle period, so the longest gap is measured (a loaded machine may stall us).
  auto previous = Clock::now();
  std::chrono::milliseconds longest_gap{0};
  for (const auto start = previous; Clock::now() - start < std::chrono::milliseconds(1800);) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const auto now = Clock::now();
    longest_gap = std::max(longest_gap, std::chrono::duration_cast<std::chrono::milliseconds>(now - previous));
    previous = now;
    REQUIRE(testing::read_whole(*m.fs, path) == m.files.at(path));
  }
  INFO("longest gap between reads: " << longest_gap.count() << " ms");
  if (longest_gap < std::chrono::milliseconds(300)) CHECK(m.frames_loaded() == loaded);
  // Then idle: trimmed after all.
  wait_for_empty_memory(*m.fs, std::chrono::seconds(10));
  CHECK(m.fs->stats().memory_used_bytes == 0);
}
