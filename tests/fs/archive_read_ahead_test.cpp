// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <set>

#include "fs/archive_read_ahead.h"

using lazycache::fs::ArchiveReadAhead;
using lazycache::fs::ArchiveReadAheadConfig;
using lazycache::fs::FrameSpan;

namespace {
// Feeds reads of the given frames (one frame each) and returns every frame asked for, checking
// that no frame is asked for twice and nothing past the end.
std::set<uint32_t> feed(ArchiveReadAhead& ra, const std::vector<uint32_t>& reads, uint32_t frame_count) {
  std::set<uint32_t> asked;
  for (uint32_t f : reads) {
    FrameSpan s = ra.on_read(f, f, frame_count);
    for (uint32_t k = s.first; k < s.first + s.count; ++k) {
      CHECK(k < frame_count);
      CHECK(k > f);  // only ahead of the reader
      CHECK(asked.insert(k).second);
    }
  }
  return asked;
}
}  // namespace

TEST_CASE("a job moving forward through the frames gets them fetched ahead", "[unit]") {
  ArchiveReadAheadConfig cfg{.initial_frames = 2, .max_frames = 8, .streams = 4, .gap_frames = 2};
  ArchiveReadAhead ra(cfg);
  // Many small files per frame: each frame is read several times, then the next one.
  std::vector<uint32_t> reads;
  for (uint32_t f = 0; f < 40; ++f)
    for (int k = 0; k < 5; ++k) reads.push_back(f);
  auto asked = feed(ra, reads, 100);
  // From the second frame on, every frame up to the window past the last read was asked for.
  for (uint32_t f = 2; f < 40 + cfg.max_frames; ++f) CHECK(asked.count(f) == 1);
  CHECK(asked.count(40 + cfg.max_frames + 1) == 0);  // never more than the window ahead
}

TEST_CASE("skipping a frame or two still counts as forward; the end of the archive bounds it", "[unit]") {
  ArchiveReadAhead ra;
  auto asked = feed(ra, {0, 2, 4, 5, 7}, 10);
  CHECK(!asked.empty());
  CHECK(*asked.rbegin() == 9);
}

TEST_CASE("random reads fetch nothing ahead", "[unit]") {
  ArchiveReadAhead ra;
  auto asked = feed(ra, {50, 3, 90, 20, 70, 10, 60, 30, 80, 40}, 100);
  CHECK(asked.empty());
  // Reading backwards is not a forward walk either.
  ArchiveReadAhead back;
  CHECK(feed(back, {60, 59, 58, 57, 56, 55}, 100).empty());
}

TEST_CASE("two interleaved forward walks are both followed", "[unit]") {
  ArchiveReadAheadConfig cfg{.initial_frames = 2, .max_frames = 4, .streams = 4, .gap_frames = 2};
  ArchiveReadAhead ra(cfg);
  std::vector<uint32_t> reads;
  for (uint32_t k = 0; k < 10; ++k) {
    reads.push_back(k);
    reads.push_back(100 + k);
  }
  auto asked = feed(ra, reads, 200);
  CHECK(asked.count(11) == 1);
  CHECK(asked.count(111) == 1);
}

TEST_CASE("bad spans are ignored", "[unit]") {
  ArchiveReadAhead ra;
  CHECK(ra.on_read(5, 4, 10).count == 0);
  CHECK(ra.on_read(0, 10, 10).count == 0);
  CHECK(ra.on_read(0, 0, 0).count == 0);
}

TEST_CASE("a walk whose frames fetched ahead reach the job without reads (page cache) is still followed", "[unit]") {
  // The page-cache hand-off (Filesystem::add_page_cache_sink): the files of frames decoded ahead
  // are served by the kernel, so the job's next read here is for the first frame past the window.
  ArchiveReadAheadConfig cfg{.initial_frames = 2, .max_frames = 8, .streams = 4, .gap_frames = 2};
  ArchiveReadAhead ra(cfg);
  std::set<uint32_t> asked, read;
  uint32_t next = 0;
  while (next < 100) {
    read.insert(next);
    FrameSpan s = ra.on_read(next, next, 100);
    for (uint32_t k = s.first; k < s.first + s.count; ++k) CHECK(asked.insert(k).second);
    // The job reads nothing of the frames asked for; its next read is the frame after them.
    next = s.count > 0 ? s.first + s.count : next + 1;
  }
  // Only the first two frames and one frame per window were cold reads; every other frame was
  // asked for ahead (before the fix a read past the window started a new cursor: 50 cold reads).
  CHECK(read.size() <= 2 + 100 / cfg.max_frames + 2);
  for (uint32_t f = 2; f < 100; ++f) CHECK(asked.count(f) + read.count(f) == 1);
}
