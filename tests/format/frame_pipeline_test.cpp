// SPDX-License-Identifier: MIT
// The pure read-plan policy of format/frame_pipeline.h: how frames are cut into range reads and
// what auto picks (issue 16 item 3); and the pipeline's decoded frames in recycled buffers.
#include <sys/stat.h>
#include <zstd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "archive_test_util.h"
#include "format/buffer_pool.h"
#include "format/frame_codec.h"
#include "format/frame_pipeline.h"
#include "format/hashing.h"
#include "tree_util.h"

using namespace lazycache;
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

TEST_CASE("auto plan: 8 reads of at least 4 MiB, parts fit the budget and spread an archive over 2 waves", "[unit]") {
  // Node-like: 31 MiB compressed: 2 waves of 8 reads would be 2 MiB: 4 MiB (a request costs the
  // server ~16 ms of CPU: 43 reads of 1 MiB cost it 0.56 s more than 10 of 4 MiB).
  auto p = choose_fetch_plan(31ull << 20, 240ull << 20, 0, 0);
  CHECK(p.concurrency == 8);
  CHECK(p.part_bytes == 4ull << 20);
  CHECK(p.ramp_parts == 8);
  // Mixed-like: 120 MiB: 120 / 16 MiB.
  p = choose_fetch_plan(120ull << 20, 240ull << 20, 0, 0);
  CHECK(p.part_bytes == (120ull << 20) / 16);
  // Incompressible 512 MiB under a small budget: 9 parts fit it.
  p = choose_fetch_plan(512ull << 20, 90ull << 20, 0, 0);
  CHECK(p.part_bytes == (90ull << 20) / 9);
  // Large archive: capped at 16 MiB.
  p = choose_fetch_plan(4ull << 30, 4ull << 30, 0, 0);
  CHECK(p.part_bytes == 16ull << 20);
  // Tiny archive: at least 4 MiB per read (one read).
  p = choose_fetch_plan(100 << 10, 240ull << 20, 0, 0);
  CHECK(p.part_bytes == 4ull << 20);
}

TEST_CASE("the parts' budget leaves room for the decode window", "[unit]") {
  // 2 decoders x 2 frames of 4 MiB ahead: 16 MiB of a 256 MiB budget.
  CHECK(parts_budget(256ull << 20, 4ull << 20, 2) == (240ull << 20));
  // A budget smaller than the window still leaves a sixteenth for parts.
  CHECK(parts_budget(8ull << 20, 4ull << 20, 2) == (512ull << 10));
}

TEST_CASE("explicit concurrency and part size are kept", "[unit]") {
  auto p = choose_fetch_plan(31ull << 20, 256ull << 20, 2, 5ull << 20);
  CHECK(p.concurrency == 2);
  CHECK(p.part_bytes == 5ull << 20);
  CHECK(p.ramp_parts == 0);  // an explicit part size is every read's size
  p = choose_fetch_plan(31ull << 20, 256ull << 20, 32, 1ull << 30);
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

// ---- the pipeline itself: decoded frames in recycled buffers ----

TEST_CASE("BufferPool: a dropped buffer is handed out again, the free list is bounded", "[unit]") {
  auto pool = BufferPool::create(3000);
  const char* first = nullptr;
  {
    auto a = pool->get(1000);
    first = a->data();
  }
  auto b = pool->get(900);  // fits the free 1000-byte buffer: no allocation
  CHECK(b->size() == 900);
  CHECK(b->data() == first);
  CHECK(pool->allocated() == 1);
  CHECK(pool->reused() == 1);
  {
    auto big1 = pool->get(2000), big2 = pool->get(2000);  // 2 x 2000 > 3000: one is freed on return
  }
  auto c = pool->get(2000), d = pool->get(2000);
  CHECK(pool->allocated() == 4);    // b, big1, big2, and d (only one 2000-byte buffer was kept)
  CHECK(pool->in_use_peak() == 3);  // b, big1, big2 (then b, c, d)
}

TEST_CASE("BufferPool: a fresh buffer reserves the capacity asked for, so a larger request reuses it", "[unit]") {
  auto pool = BufferPool::create(1 << 20);
  const char* first = nullptr;
  {
    auto a = pool->get(900, 1000);  // a frame a little under the largest
    CHECK(a->size() == 900);
    first = a->data();
  }
  auto b = pool->get(1000, 1000);  // the largest frame: the freed buffer holds it
  CHECK(b->size() == 1000);
  CHECK(b->data() == first);
  CHECK(pool->allocated() == 1);
  CHECK(pool->reused() == 1);
}

TEST_CASE("decoded frames come in recycled buffers: a consumer that drops each frame uses a window of them", "[unit]") {
  using namespace lazycache::testing;
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  for (int i = 0; i < 12; ++i) write_file(src / ("r/f" + std::to_string(i)), pattern(300u << 10, static_cast<uint64_t>(i)));
  lazycache::format::PackConfig pc;
  pc.frame_size_bytes = 128u << 10;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", pc);
  auto reader = open_archive(work / "a.tar.zst");
  const size_t n = reader->index().frames().size();
  REQUIRE(n >= 24);
  std::vector<uint32_t> all(n);
  for (uint32_t i = 0; i < n; ++i) all[i] = i;
  const int decoders = 2;
  FramePipeline pipe(*reader, all, choose_fetch_plan(0, 256u << 20, 4, 64u << 10), 256u << 20, decoders);
  for (size_t seq = 0; seq < n; ++seq) {
    auto frame = pipe.take(seq);
    REQUIRE(frame.ok());
    auto want = reader->read_frame(static_cast<uint32_t>(seq));
    REQUIRE(want.ok());
    REQUIRE(**frame == *want);
  }
  // Alive at once: the frame the consumer holds (dropped before it takes the next) and the window
  // ahead of it, decoded or being decoded. Frames differ in size (a frame ends at a member
  // boundary past the target), but every buffer is made large enough for the largest, so one is
  // fresh only when none is free: the bound on buffers alive bounds the buffers allocated too
  // (it did not while a buffer freed by a smaller frame could not serve a larger one: 6 > 5).
  const size_t window = FramePipeline::kDecodeAheadPerDecoder * decoders + 1;
  CHECK(pipe.frame_buffers_peak() <= window);
  CHECK(pipe.frame_buffers_allocated() <= window);
  CHECK(pipe.frame_buffers_allocated() + pipe.frame_buffers_reused() == n);
}

// ---- decode_frame_checked_into: the seek-table checksum, by zstd's own or by a pass of XXH64 ----

namespace {
FrameInfo info_for(const std::string& compressed, const std::string& content) {
  FrameInfo f;
  f.compressed_size = static_cast<uint32_t>(compressed.size());
  f.uncompressed_size = static_cast<uint32_t>(content.size());
  f.digest = xxh3_128(std::as_bytes(std::span<const char>(compressed)));
  f.xxh64_low32 = xxh64_low32(std::as_bytes(std::span<const char>(content)));
  return f;
}
Status decode(const FrameInfo& f, const std::string& compressed, std::string& out) {
  out.assign(f.uncompressed_size, 'x');
  return decode_frame_checked_into(f, 0, std::as_bytes(std::span<const char>(compressed)), std::as_writable_bytes(std::span<char>(out)));
}
}  // namespace

TEST_CASE("decode into a buffer: content and seek-table checksum verified, with and without zstd's checksum", "[unit]") {
  const std::string content = lazycache::testing::pattern(200000, 3);
  auto with = compress_frame(std::as_bytes(std::span<const char>(content)), 3);  // pack's frames: zstd checksum on
  REQUIRE(with.ok());
  std::string without(ZSTD_compressBound(content.size()), '\0');  // zstd's default: no checksum
  without.resize(ZSTD_compress(without.data(), without.size(), content.data(), content.size(), 3));
  REQUIRE((std::to_integer<uint8_t>(std::as_bytes(std::span<const char>(without))[4]) & 0x04) == 0);
  for (const std::string* c : {&*with, &without}) {
    std::string out;
    FrameInfo f = info_for(*c, content);
    REQUIRE(decode(f, *c, out).ok());
    CHECK(out == content);
    f.xxh64_low32 ^= 1;  // the seek table disagrees with the content
    Status s = decode(f, *c, out);
    CHECK(s.code() == ErrorCode::kCorrupt);
    CHECK_THAT(s.message(), Catch::Contains("checksum"));
  }
  // Content that does not match zstd's checksum (digest recomputed, so only the checksum can tell).
  std::string bad = *with;
  bad[bad.size() - 1] ^= 1;  // the stored checksum itself
  FrameInfo f = info_for(bad, content);
  f.xxh64_low32 = xxh64_low32(std::as_bytes(std::span<const char>(content)));
  std::string out;
  CHECK(decode(f, bad, out).code() == ErrorCode::kCorrupt);
  // Bytes after the frame (a skippable frame) never pose as its checksum: their last 4 bytes equal
  // a wrong seek-table checksum, which must still be caught.
  std::string trailing = *with + std::string("\x50\x2a\x4d\x18\x04\x00\x00\x00", 8) + std::string(4, '\0');
  FrameInfo ft = info_for(trailing, content);
  ft.xxh64_low32 ^= 1;
  std::memcpy(trailing.data() + trailing.size() - 4, &ft.xxh64_low32, 4);  // little-endian host
  ft.digest = xxh3_128(std::as_bytes(std::span<const char>(trailing)));
  CHECK(decode(ft, trailing, out).code() == ErrorCode::kCorrupt);
}

// ---- frames go to the decoders as their bytes arrive, not when the whole part is in ----

namespace {
// A local archive whose streamed reads deliver their first half, then wait for open() (at most
// 10 s) before the rest: a part's first frames are in long before the part is.
class HalfwayGatedSource final : public ByteSource {
 public:
  explicit HalfwayGatedSource(std::shared_ptr<const ByteSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override { return inner_->read_at(offset, out); }
  Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const override {
    const size_t half = out.size() / 2;
    auto first = inner_->read_at(offset, out.first(half));
    if (!first.ok()) return first;
    if (progress) progress(*first);
    {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; })) timed_out_ = true;
    }
    auto rest = inner_->read_at(offset + half, out.subspan(half));
    if (!rest.ok()) return rest;
    if (progress) progress(half + *rest);
    return half + *rest;
  }
  std::string describe() const override { return "gated " + inner_->describe(); }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool timed_out() const {
    std::lock_guard lock(mu_);
    return timed_out_;
  }

 private:
  std::shared_ptr<const ByteSource> inner_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool open_ = false;
  mutable bool timed_out_ = false;
};
}  // namespace

TEST_CASE("a part's first frames are decoded and taken while the rest of the part is still on its way", "[unit]") {
  using namespace lazycache::testing;
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  for (int i = 0; i < 8; ++i) write_file(src / ("r/f" + std::to_string(i)), pattern(200u << 10, static_cast<uint64_t>(i)));
  lazycache::format::PackConfig pc;
  pc.frame_size_bytes = 128u << 10;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", pc);
  auto local = LocalFileSource::open(work / "a.tar.zst");
  REQUIRE(local.ok());
  auto gated = std::make_shared<HalfwayGatedSource>(std::shared_ptr<const ByteSource>(std::move(local).value()));
  auto opened = ArchiveReader::open(gated);
  REQUIRE(opened.ok());
  auto reader = std::move(opened).value();
  const size_t n = reader->index().frames().size();
  REQUIRE(n >= 8);
  std::vector<uint32_t> all(n);
  for (uint32_t i = 0; i < n; ++i) all[i] = i;
  // One read of the whole archive's frames: without streaming, nothing could be taken before the
  // gate opens.
  FramePipeline pipe(*reader, all, choose_fetch_plan(0, 256u << 20, 1, 1ull << 30), 256u << 20, 2);
  REQUIRE(pipe.part_count() == 1);
  auto first = pipe.take(0);
  const bool taken_before_open = !gated->timed_out();
  gated->open();
  REQUIRE(first.ok());
  CHECK(taken_before_open);
  CHECK(**first == *reader->read_frame(0));
  for (size_t seq = 1; seq < n; ++seq) {
    auto frame = pipe.take(seq);
    REQUIRE(frame.ok());
    CHECK(**frame == *reader->read_frame(static_cast<uint32_t>(seq)));
  }
}
