// SPDX-License-Identifier: MIT
// Readahead across files inside the learned hot region (the files of the index's hot list, laid
// out first) stops at the region's last frame: a job reading its hot files in order gets the
// region fetched ahead of it, and not one byte of the archive past the region.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fs/archive_read_ahead.h"
#include "fs/filesystem.h"
#include "fs_read_util.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

// Passes reads through and remembers how far into the archive any of them reached.
class ReachSource final : public ByteSource {
 public:
  explicit ReachSource(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    {
      std::lock_guard lock(mu_);
      reach_ = std::max<uint64_t>(reach_, offset + out.size());
      ++reads_;
    }
    return inner_->read_at(offset, out);
  }
  std::string describe() const override { return "reach " + inner_->describe(); }
  // Forgets what was read so far (the mount's own tail reads).
  void reset() {
    std::lock_guard lock(mu_);
    reach_ = 0;
    reads_ = 0;
  }
  uint64_t reach() const {
    std::lock_guard lock(mu_);
    return reach_;
  }

 private:
  std::unique_ptr<ByteSource> inner_;
  mutable std::mutex mu_;  // guards reach_, reads_
  mutable uint64_t reach_ = 0, reads_ = 0;
};

// The learned files: two of each of the first 25 packages, in package order.
std::vector<std::string> hot_paths() {
  std::vector<std::string> hot;
  for (int p = 0; p < 25; ++p) {
    hot.push_back("t/node_modules/pkg-" + std::to_string(p) + "/index.js");
    hot.push_back("t/node_modules/pkg-" + std::to_string(p) + "/lib/util.js");
  }
  return hot;
}

}  // namespace

TEST_CASE("readahead in the hot region fetches ahead of the reads but stops at the region's last frame", "[unit]") {
  TempDir dir;
  testing::make_node_like_tree(dir / "t", 40);
  testing::pack_tree(dir.path(), {"t"}, dir / "a.tar.zst", 16 << 10, hot_paths());
  auto file = LocalFileSource::open(dir / "a.tar.zst");
  REQUIRE(file.ok());
  auto source = std::make_shared<ReachSource>(std::move(file).value());
  auto reader = format::ArchiveReader::open(source);
  REQUIRE(reader.ok());
  const format::Index& idx = (*reader)->index();

  // The region as the index describes it: the hot files, first in the stream.
  REQUIRE(idx.hot_list().size() == hot_paths().size());
  uint64_t region_end = 0;
  std::vector<std::pair<uint32_t, uint32_t>> file_frames;  // each hot file's frames, read order
  for (const auto& p : hot_paths()) {
    const format::Entry e = idx.entry(*idx.lookup_path(p));
    region_end = std::max(region_end, e.data_offset + e.size);
    file_frames.push_back(idx.frames_for_range(e.data_offset, e.size));
  }
  const uint32_t last_hot_frame = idx.frames_for_range(region_end - 1, 1).second;
  const auto frames = idx.frames();
  REQUIRE(last_hot_frame + 10 < frames.size());  // plenty of archive after the region
  const uint64_t region_compressed_end = frames[last_hot_frame].compressed_offset + frames[last_hot_frame].compressed_size;

  // Without the region's limit the same reads would fetch past it: the test can fail.
  {
    fs::ArchiveReadAhead unbounded;
    uint32_t furthest = 0;
    for (auto [a, b] : file_frames) {
      fs::FrameSpan s = unbounded.on_read(a, b, static_cast<uint32_t>(frames.size()));
      if (s.count > 0) furthest = std::max(furthest, s.first + s.count - 1);
    }
    REQUIRE(furthest > last_hot_frame);
  }

  source->reset();
  fs::Filesystem f(std::move(reader).value(), nullptr);
  // The first files, up to the third frame: readahead has fetched frames not read yet.
  size_t i = 0;
  for (; i < hot_paths().size() && file_frames[i].second < 3; ++i)
    REQUIRE(testing::read_whole(f, hot_paths()[i]) == testing::read_file(dir / hot_paths()[i]));
  f.wait_prefetch_idle();
  const uint32_t read_so_far = file_frames[i - 1].second;
  CHECK(f.stats().frames_from_store > read_so_far + 1);
  CHECK(source->reach() <= region_compressed_end);

  // The rest of the hot files, in order.
  for (; i < hot_paths().size(); ++i) REQUIRE(testing::read_whole(f, hot_paths()[i]) == testing::read_file(dir / hot_paths()[i]));
  f.wait_prefetch_idle();
  const fs::MountStats s = f.stats();
  CHECK(s.frames_from_store <= last_hot_frame + 1);
  CHECK(source->reach() <= region_compressed_end);
  INFO("region: frames 0-" << last_hot_frame << " of " << frames.size() << ", " << region_compressed_end << " bytes");
  CHECK(s.store_bytes <= region_compressed_end);
}
