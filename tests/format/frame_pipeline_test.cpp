// SPDX-License-Identifier: MIT
// The pure read-plan policy of format/frame_pipeline.h: how frames are cut into range reads and
// what auto picks (issue 16 item 3).
#include <catch2/catch.hpp>

#include <vector>

#include "format/frame_pipeline.h"

using namespace lazycache::format;

namespace {
// `n` frames of `size` compressed bytes, back to back.
std::vector<FrameInfo> frames_of(size_t n, uint32_t size) {
  std::vector<FrameInfo> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].compressed_offset = i * uint64_t{size};
    out[i].compressed_size = size;
    out[i].uncompressed_offset = i * (4ull << 20);
    out[i].uncompressed_size = 4u << 20;
  }
  return out;
}
}  // namespace

TEST_CASE("parts are runs of adjacent frames up to the part size", "[unit]") {
  auto all = frames_of(10, 1 << 20);
  std::vector<uint32_t> list{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto parts = plan_fetch_parts(all, list, 3 << 20);
  REQUIRE(parts.size() == 4);  // 3 + 3 + 3 + 1 frames
  CHECK(parts[0].first == 0);
  CHECK(parts[0].end == 3);
  CHECK(parts[0].offset == 0);
  CHECK(parts[0].length == 3u << 20);
  CHECK(parts[3].first == 9);
  CHECK(parts[3].length == 1u << 20);
}

TEST_CASE("a gap in the frame list (a selection) starts a new part", "[unit]") {
  auto all = frames_of(10, 1 << 20);
  std::vector<uint32_t> list{0, 1, 5, 6};
  auto parts = plan_fetch_parts(all, list, 16 << 20);
  REQUIRE(parts.size() == 2);
  CHECK(parts[1].first == 2);
  CHECK(parts[1].offset == 5u << 20);
  CHECK(parts[1].length == 2u << 20);
}

TEST_CASE("a frame larger than the part size is one part of its own", "[unit]") {
  auto all = frames_of(3, 8 << 20);
  std::vector<uint32_t> list{0, 1, 2};
  CHECK(plan_fetch_parts(all, list, 1 << 20).size() == 3);
}

TEST_CASE("auto plan: 8 reads, parts fit the budget and spread an archive over 4 waves", "[unit]") {
  // Node-like: 31 MiB compressed, ratio 5: 4 waves of 8 reads would be under 1 MiB: 1 MiB.
  auto p = choose_fetch_plan(31ull << 20, 157ull << 20, 256ull << 20, 0, 0);
  CHECK(p.concurrency == 8);
  CHECK(p.part_bytes == 1ull << 20);
  CHECK(p.ramp_parts == 8);
  // Mixed-like: 120 MiB, ratio 2.5: 120 / 32 MiB (the budget would allow 8.1 MiB).
  p = choose_fetch_plan(120ull << 20, 300ull << 20, 256ull << 20, 0, 0);
  CHECK(p.part_bytes == (120ull << 20) / 32);
  // Incompressible 512 MiB: the budget holds 9 parts twice over (compressed + decoded).
  p = choose_fetch_plan(512ull << 20, 512ull << 20, 256ull << 20, 0, 0);
  CHECK(p.part_bytes == (256ull << 20) / 18);
  // Large compressible archive with a big budget: capped at 16 MiB.
  p = choose_fetch_plan(4ull << 30, 8ull << 30, 4ull << 30, 0, 0);
  CHECK(p.part_bytes == 16ull << 20);
  // Tiny archive: at least 1 MiB per read.
  p = choose_fetch_plan(100 << 10, 400 << 10, 256ull << 20, 0, 0);
  CHECK(p.part_bytes == 1ull << 20);
}

TEST_CASE("explicit concurrency and part size are kept", "[unit]") {
  auto p = choose_fetch_plan(31ull << 20, 157ull << 20, 256ull << 20, 2, 5ull << 20);
  CHECK(p.concurrency == 2);
  CHECK(p.part_bytes == 5ull << 20);
  CHECK(p.ramp_parts == 0);  // an explicit part size is every read's size
  p = choose_fetch_plan(31ull << 20, 157ull << 20, 256ull << 20, 32, 1ull << 30);
  CHECK(p.concurrency == 32);
  CHECK(p.part_bytes == 1ull << 30);
}

TEST_CASE("a ramp holds the first wave's parts to 1/n, 2/n, ... of the part size", "[unit]") {
  auto all = frames_of(20, 1 << 20);
  std::vector<uint32_t> list;
  for (uint32_t i = 0; i < 20; ++i) list.push_back(i);
  auto parts = plan_fetch_parts(all, list, 8 << 20, 8);
  std::vector<uint64_t> frames_per_part;
  for (const auto& p : parts) frames_per_part.push_back(p.end - p.first);
  CHECK(frames_per_part == std::vector<uint64_t>{1, 2, 3, 4, 5, 5});
  // Below one frame per step, each part still takes one frame.
  parts = plan_fetch_parts(all, list, 2 << 20, 8);
  REQUIRE(parts.size() >= 8);
  for (size_t k = 0; k < 7; ++k) CHECK(parts[k].end - parts[k].first == 1);
  CHECK(parts[8].end - parts[8].first == 2);
}
