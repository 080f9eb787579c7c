// SPDX-License-Identifier: MIT
// Frames larger than the memory budget (issue 13): a legal archive (`pack --frame-size 512M`)
// under the default 256 MiB budget decompressed its frame again for every 128 KiB read and held
// twice the budget. Scaled down so the test is fast: an 8 MiB budget, 16 MiB frames. Sequential
// and random reads are correct, each frame is decoded about once, and the budget is never
// exceeded, both for frames whose compressed bytes fit the budget (read whole, chunk cached) and
// for frames whose compressed bytes do not (read in pieces).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <random>

#include "fs/filesystem.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

constexpr uint64_t kBudget = 8ull << 20;
constexpr uint64_t kFrame = 16ull << 20;

struct Archive {
  TempDir dir;
  std::string path = dir / "a.tar.zst";
  std::string noisy, text;  // the two files' contents
  explicit Archive() {
    ::mkdir((dir / "t").c_str(), 0755);
    noisy = testing::pattern(40ull << 20, 3);  // compresses to about half: pieces path
    text.reserve(24ull << 20);
    for (int i = 0; text.size() < (24ull << 20); ++i) text += "line " + std::to_string(i % 1000) + " of a log that repeats\n";
    testing::write_file(dir / "t/noisy.bin", noisy);
    testing::write_file(dir / "t/text.log", text);
    testing::pack_tree(dir.path(), {"t"}, path, kFrame);
  }
};

std::unique_ptr<fs::Filesystem> open_fs(const Archive& a, const std::string& cache_dir) {
  auto file = LocalFileSource::open(a.path);
  REQUIRE(file.ok());
  auto reader = format::ArchiveReader::open(std::shared_ptr<const ByteSource>(std::move(file).value()));
  REQUIRE(reader.ok());
  auto cache = fs::ChunkCache::open({cache_dir, 1ull << 30});
  REQUIRE(cache.ok());
  fs::FilesystemConfig cfg;
  cfg.memory_budget_bytes = kBudget;
  return std::make_unique<fs::Filesystem>(std::move(reader).value(), *cache, cfg);
}

std::string read_range(fs::Filesystem& f, uint64_t h, uint64_t offset, size_t size) {
  auto r = f.read_sync(h, offset, size);
  INFO((r.ok() ? std::string() : r.error().to_string()));
  REQUIRE(r.ok());
  return *r;
}

void check_file(fs::Filesystem& f, const std::string& path, const std::string& want) {
  auto id = f.index().lookup_path(path);
  REQUIRE(id);
  auto h = f.open(*id, O_RDONLY);
  REQUIRE(h.ok());
  // Sequential, as cp and tar read: 128 KiB at a time.
  std::string got;
  for (uint64_t off = 0; off < want.size(); off += 128 << 10) got += read_range(f, *h, off, 128 << 10);
  CHECK(got == want);
  // Random reads, across frame boundaries too.
  std::mt19937_64 rng(42);
  for (int i = 0; i < 100; ++i) {
    const uint64_t off = rng() % want.size();
    const size_t len = 1 + rng() % (256 << 10);
    CHECK(read_range(f, *h, off, len) == want.substr(off, len));
  }
  f.release(*h);
}

}  // namespace

TEST_CASE("frames larger than the memory budget are decoded once and served within the budget", "[unit]") {
  Archive a;
  TempDir cache;
  auto f = open_fs(a, cache.path());
  const uint64_t frames = f->index().frames().size();
  check_file(*f, "t/noisy.bin", a.noisy);
  check_file(*f, "t/text.log", a.text);
  const fs::MountStats s = f->stats();
  INFO("frames " << frames << ", spilled " << s.frames_spilled << ", from store " << s.frames_from_store << ", from chunk cache "
                 << s.frames_from_chunk_cache << ", peak " << s.memory_peak_bytes);
  CHECK(s.read_errors == 0);
  // Each frame decoded about once (random reads may revisit a frame the spill let go of),
  // not once per read (there were hundreds).
  CHECK(s.frames_from_store + s.frames_from_chunk_cache <= 2 * frames);
  CHECK(s.frames_spilled >= 4);
  CHECK(s.memory_peak_bytes <= kBudget);
  f.reset();
  {
    auto c = fs::ChunkCache::open({cache.path(), 1ull << 30});
    REQUIRE(c.ok());
    INFO("chunks " << (*c)->stats()->chunk_count);
    CHECK((*c)->stats()->chunk_count >= 1);
  }

  // A second mount on the same chunk cache: the frames that fit it come from there.
  auto again = open_fs(a, cache.path());
  check_file(*again, "t/text.log", a.text);
  CHECK(again->stats().frames_from_chunk_cache >= 1);
  CHECK(again->stats().memory_peak_bytes <= kBudget);
}
