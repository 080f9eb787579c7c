// SPDX-License-Identifier: MIT
// format/frame_source.h: the one "cache, else a merged range read, then check" of the mount, the
// incremental save and extract (issue 19 item 3). An in-memory archive of synthetic frames (the
// FrameSource never decodes, so any bytes with their digest are a frame), a counting source, and
// caches that hold, miss, fail and lie. One test per rule of the header.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/byte_source.h"
#include "format/frame_source.h"
#include "format/hashing.h"

using namespace lazycache;
using namespace lazycache::format;

namespace {

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }
std::span<std::byte> writable(std::string& s) { return std::as_writable_bytes(std::span<char>(s.data(), s.size())); }

// `n` frames of distinct sizes back to back, each byte depending on frame and position.
struct Archive {
  std::string bytes;
  std::vector<FrameInfo> frames;
  explicit Archive(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      std::string f(1000 + 37 * i, '\0');
      for (size_t k = 0; k < f.size(); ++k) f[k] = static_cast<char>((i * 131 + k * 7) % 251);
      FrameInfo info;
      info.compressed_offset = bytes.size();
      info.compressed_size = static_cast<uint32_t>(f.size());
      info.digest = xxh3_128(bytes_of(f));
      frames.push_back(info);
      bytes += f;
    }
  }
  std::string frame(uint32_t f) const { return bytes.substr(frames[f].compressed_offset, frames[f].compressed_size); }
};

// A source over `bytes` that counts its calls and requests, and fails every read with `fail`.
class CountingSource final : public ByteSource {
 public:
  explicit CountingSource(std::string bytes) : mem_(std::move(bytes)) {}
  uint64_t size() const override { return mem_.size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    ++read_at_calls;
    if (!fail.ok()) return fail;
    return mem_.read_at(offset, out);
  }
  Status read_ranges(std::span<ReadRequest> requests) const override {
    ++read_ranges_calls;
    ranges += requests.size();
    if (!fail.ok()) return fail;
    for (auto& r : requests) {
      auto n = mem_.read_at(r.offset, r.out);
      if (!n.ok()) return n.error();
      r.bytes_read = *n;
    }
    return Status();
  }
  std::string describe() const override { return "test archive"; }

  Status fail;
  mutable std::atomic<int> read_at_calls{0}, read_ranges_calls{0}, ranges{0};

 private:
  MemorySource mem_;
};

// A cache in memory; `get_error` makes every get() fail with it (a cache that cannot read its
// copies), `put_error` every put().
class MapCache final : public FrameDataCache {
 public:
  Result<ByteBuffer> get(const Digest128& digest) override {
    std::lock_guard lock(mu_);
    ++gets;
    if (!get_error.ok()) return get_error;
    auto it = blobs.find(digest.hex());
    if (it == blobs.end()) return Status(ErrorCode::kNotFound, "miss");
    ByteBuffer copy(it->second.size());
    std::memcpy(copy.data(), it->second.data(), it->second.size());
    return copy;
  }
  Status put(const Digest128& digest, std::span<const std::byte> bytes) override {
    std::lock_guard lock(mu_);
    ++puts;
    if (!put_error.ok()) return put_error;
    blobs[digest.hex()] = std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return Status();
  }
  void hold(const Archive& a, uint32_t f) { blobs[a.frames[f].digest.hex()] = a.frame(f); }

  std::map<std::string, std::string> blobs;
  Status get_error, put_error;
  int gets = 0, puts = 0;

 private:
  std::mutex mu_;
};

struct BadCopies {
  std::vector<uint32_t> frames;
  std::vector<Status> why;
  FrameSource::BadCopyHook hook() {
    return [this](uint32_t f, const Status& s) {
      frames.push_back(f);
      why.push_back(s);
    };
  }
};

}  // namespace

TEST_CASE("frame source: cached frames come from the cache, the misses in one merged range per run", "[unit]") {
  Archive a(6);
  CountingSource src(a.bytes);
  MapCache cache;
  cache.hold(a, 0);
  cache.hold(a, 4);
  const FrameSource fs(src, a.frames, cache);
  std::string out(fs.span_bytes(0, 5), '\0');
  auto got = fs.fetch(0, 5, writable(out));
  REQUIRE(got.ok());
  CHECK(out == a.bytes);
  CHECK(got->from_cache == 2);
  CHECK(got->from_source == 4);
  CHECK(got->range_reads == 2);  // 1-3 merged, 5 alone
  CHECK(got->source_bytes == fs.span_bytes(1, 3) + a.frames[5].compressed_size);
  CHECK(src.read_ranges_calls == 1);  // every range in one call (concurrent for a store)
  CHECK(src.ranges == 2);

  SECTION("everything cached: no read at all") {
    for (uint32_t f = 0; f < 6; ++f) cache.hold(a, f);
    std::string again(out.size(), '\0');
    auto all = fs.fetch(0, 5, writable(again));
    REQUIRE(all.ok());
    CHECK(all->from_cache == 6);
    CHECK(src.read_ranges_calls == 1);
    CHECK(again == a.bytes);
  }
}

TEST_CASE("frame source: the no-cache source reads everything and stores nothing", "[unit]") {
  Archive a(3);
  CountingSource src(a.bytes);
  const FrameSource fs(src, a.frames, no_frame_cache());
  CHECK(fs.cached(1).error().code() == ErrorCode::kNotFound);
  fs.store(1, bytes_of(a.frame(1)));
  CHECK(fs.cached(1).error().code() == ErrorCode::kNotFound);
  std::string out(a.bytes.size(), '\0');
  auto got = fs.fetch(0, 2, writable(out));
  REQUIRE(got.ok());
  CHECK(got->from_source == 3);
  CHECK(got->range_reads == 1);
  CHECK(out == a.bytes);
}

TEST_CASE("frame source rule: a short read is kCorrupt, in every form", "[unit]") {
  Archive a(4);
  // The object ends inside frame 3: the archive is shorter than its seek table says.
  CountingSource src(a.bytes.substr(0, a.bytes.size() - 10));
  MapCache cache;
  const FrameSource fs(src, a.frames, cache);

  std::string out(fs.span_bytes(0, 3), '\0');
  auto fetched = fs.fetch(0, 3, writable(out));
  REQUIRE_FALSE(fetched.ok());
  CHECK(fetched.error().code() == ErrorCode::kCorrupt);  // the incremental save said kUnavailable
  CHECK(fetched.error().message().find("shorter than its seek table") != std::string::npos);

  auto run = fs.read_run(0, 3, writable(out));
  CHECK(run.status.code() == ErrorCode::kCorrupt);
  CHECK(run.bytes_read == a.bytes.size() - 10);
  REQUIRE(run.frames.size() == 4);
  for (const Status& s : run.frames) CHECK(s.code() == ErrorCode::kCorrupt);

  std::string piece(a.frames[3].compressed_size, '\0');
  auto range = fs.read_range(a.frames[3].compressed_offset, writable(piece), "frame 3");
  CHECK(range.status.code() == ErrorCode::kCorrupt);
  CHECK(range.status.message().find("frame 3") != std::string::npos);
}

TEST_CASE("frame source rule: bytes that fail their digest are kCorrupt, only for that frame", "[unit]") {
  Archive a(4);
  std::string damaged = a.bytes;
  damaged[a.frames[2].compressed_offset + 5] ^= 0x40;
  CountingSource src(damaged);
  MapCache cache;
  const FrameSource fs(src, a.frames, cache);

  std::string out(a.bytes.size(), '\0');
  auto run = fs.read_run(0, 3, writable(out));
  CHECK(run.status.ok());  // the read itself worked
  REQUIRE(run.frames.size() == 4);
  CHECK(run.frames[0].ok());
  CHECK(run.frames[1].ok());
  CHECK(run.frames[2].code() == ErrorCode::kCorrupt);
  CHECK(run.frames[2].message().find("frame 2") != std::string::npos);
  CHECK(run.frames[3].ok());

  auto fetched = fs.fetch(0, 3, writable(out));
  REQUIRE_FALSE(fetched.ok());
  CHECK(fetched.error().code() == ErrorCode::kCorrupt);
  CHECK(fetched.error().message().find("XXH3-128") != std::string::npos);
}

TEST_CASE("frame source rule: the source's own errors keep their code and gain context", "[unit]") {
  Archive a(3);
  CountingSource src(a.bytes);
  src.fail = Status(ErrorCode::kUnavailable, "HTTP 503");
  MapCache cache;
  const FrameSource fs(src, a.frames, cache);
  std::string out(a.bytes.size(), '\0');
  auto fetched = fs.fetch(0, 2, writable(out));
  REQUIRE_FALSE(fetched.ok());
  CHECK(fetched.error().code() == ErrorCode::kUnavailable);
  CHECK(fetched.error().message().find("frames 0-2 of test archive") != std::string::npos);
  auto run = fs.read_run(0, 2, writable(out));
  CHECK(run.status.code() == ErrorCode::kUnavailable);
  CHECK(run.bytes_read == 0);
  for (const Status& s : run.frames) CHECK(s.code() == ErrorCode::kUnavailable);
}

TEST_CASE("frame source rule: a failing cache is a miss, reported, and the frame comes from the source", "[unit]") {
  Archive a(3);
  CountingSource src(a.bytes);
  MapCache cache;
  BadCopies bad;
  const FrameSource fs(src, a.frames, cache, bad.hook());

  SECTION("get() fails (an unreadable copy)") {
    cache.hold(a, 1);
    cache.get_error = Status(ErrorCode::kIo, "reading blob: EIO");
    std::string out(a.bytes.size(), '\0');
    auto got = fs.fetch(0, 2, writable(out));
    REQUIRE(got.ok());
    CHECK(out == a.bytes);
    CHECK(got->from_cache == 0);
    CHECK(got->from_source == 3);
    CHECK(bad.frames.size() == 3);
    CHECK(bad.why[0].code() == ErrorCode::kIo);
  }
  SECTION("get() returns wrong bytes (a cache that lies)") {
    cache.blobs[a.frames[1].digest.hex()] = a.frame(0);
    std::string out(a.bytes.size(), '\0');
    auto got = fs.fetch(0, 2, writable(out));
    REQUIRE(got.ok());
    CHECK(out == a.bytes);
    CHECK(got->from_source == 3);
    REQUIRE(bad.frames == std::vector<uint32_t>{1});
    CHECK(bad.why[0].code() == ErrorCode::kCorrupt);
    auto direct = fs.cached(1);
    CHECK(direct.error().code() == ErrorCode::kNotFound);  // never an error of the read
  }
  SECTION("put() fails: store() shrugs, the next lookup is a miss") {
    cache.put_error = Status(ErrorCode::kResourceExhausted, "disk full");
    fs.store(2, bytes_of(a.frame(2)));
    CHECK(cache.puts == 1);
    CHECK(fs.cached(2).error().code() == ErrorCode::kNotFound);
    CHECK(bad.frames.empty());  // a miss is not a bad copy
  }
  SECTION("a good copy is returned as stored") {
    fs.store(2, bytes_of(a.frame(2)));
    auto hit = fs.cached(2);
    REQUIRE(hit.ok());
    CHECK(*hit == a.frame(2));
    CHECK(bad.frames.empty());
  }
}

TEST_CASE("frame source: read_run skips the prefilled head and refuses frames that are not back to back", "[unit]") {
  Archive a(4);
  CountingSource src(a.bytes);
  const FrameSource fs(src, a.frames, no_frame_cache());
  std::string out(a.bytes.size(), '\0');
  const uint64_t head = a.frames[1].compressed_offset + 10;
  std::copy_n(a.bytes.begin(), head, out.begin());
  auto run = fs.read_run(0, 3, writable(out), head);
  REQUIRE(run.status.ok());
  CHECK(run.bytes_read == a.bytes.size() - head);
  for (const Status& s : run.frames) CHECK(s.ok());
  CHECK(out == a.bytes);

  std::vector<FrameInfo> gap = a.frames;
  gap[2].compressed_offset += 1;  // something between frames 1 and 2
  const FrameSource gapped(src, gap, no_frame_cache());
  std::string buf(gapped.span_bytes(0, 3), '\0');
  CHECK(gapped.read_run(0, 3, writable(buf)).status.code() == ErrorCode::kInvalidArgument);
  CHECK(gapped.read_run(3, 9, writable(buf)).status.code() == ErrorCode::kInvalidArgument);
  CHECK(gapped.read_run(0, 1, writable(buf)).status.code() == ErrorCode::kInvalidArgument);  // wrong buffer size
}

TEST_CASE("frame source: contiguous_runs cuts at gaps in numbers and in the archive", "[unit]") {
  Archive a(6);
  std::vector<uint32_t> list{0, 1, 3, 4, 5};
  auto runs = contiguous_runs(a.frames, list);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0] == std::pair<size_t, size_t>{0, 2});
  CHECK(runs[1] == std::pair<size_t, size_t>{2, 5});
  std::vector<FrameInfo> gap = a.frames;
  gap[4].compressed_offset += 1;  // a byte between frames 3 and 4: {0, 1}, {3}, {4, 5}
  gap[5].compressed_offset += 1;
  CHECK(contiguous_runs(gap, list).size() == 3);
  CHECK(contiguous_runs(a.frames, std::vector<uint32_t>{}).empty());
}

namespace {

// A source that delivers a read in pieces of `piece` bytes, telling its ReadProgress after each,
// and records how far it had got each time a frame was handed on; `fail_after` ends a read with
// kUnavailable once that many bytes of it are in.
class StreamingSource final : public ByteSource {
 public:
  StreamingSource(std::string bytes, size_t piece) : bytes_(std::move(bytes)), piece_(piece) {}
  uint64_t size() const override { return bytes_.size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override { return read_at_streaming(offset, out, {}); }
  Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const override {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), bytes_.size() - std::min<uint64_t>(offset, bytes_.size())));
    for (size_t done = 0; done < n;) {
      if (done >= fail_after) return Status(ErrorCode::kUnavailable, "connection lost");
      const size_t k = std::min(piece_, n - done);
      std::memcpy(out.data() + done, bytes_.data() + offset + done, k);
      done += k;
      in = done;
      if (progress) progress(done);
    }
    return n;
  }
  std::string describe() const override { return "streaming test archive"; }

  size_t fail_after = SIZE_MAX;
  mutable size_t in = 0;  // bytes of the current read delivered so far

 private:
  std::string bytes_;
  size_t piece_;
};

}  // namespace

TEST_CASE("frame source: with `ready`, each frame is handed on as soon as its bytes are in, once, in order", "[unit]") {
  Archive a(6);
  StreamingSource src(a.bytes, 500);
  FrameSource fs(src, a.frames, no_frame_cache());
  std::string out(fs.span_bytes(0, 5), '\0');
  std::vector<uint32_t> handed;
  std::vector<size_t> in_when_handed;
  auto run = fs.read_run(0, 5, writable(out), 0, [&](uint32_t f) {
    handed.push_back(f);
    in_when_handed.push_back(src.in);
  });
  REQUIRE(run.status.ok());
  CHECK(handed == std::vector<uint32_t>{0, 1, 2, 3, 4, 5});
  for (size_t f = 0; f < 6; ++f) {
    CHECK(run.frames[f].ok());
    // Handed within one piece of its own end, long before the run's end for the early frames.
    const uint64_t end = a.frames[f].compressed_offset + a.frames[f].compressed_size;
    CHECK(in_when_handed[f] >= end);
    CHECK(in_when_handed[f] < end + 500);
  }
  CHECK(out == a.bytes);
}

TEST_CASE("frame source: with `ready`, a damaged frame is not handed on, the others are", "[unit]") {
  Archive a(4);
  std::string damaged = a.bytes;
  damaged[a.frames[1].compressed_offset + 10] ^= 0x20;
  StreamingSource src(damaged, 700);
  FrameSource fs(src, a.frames, no_frame_cache());
  std::string out(fs.span_bytes(0, 3), '\0');
  std::vector<uint32_t> handed;
  auto run = fs.read_run(0, 3, writable(out), 0, [&](uint32_t f) { handed.push_back(f); });
  REQUIRE(run.status.ok());
  CHECK(handed == std::vector<uint32_t>{0, 2, 3});
  CHECK(run.frames[1].code() == ErrorCode::kCorrupt);
}

TEST_CASE("frame source: with `ready`, frames in before a read fails keep their status; the rest get the error", "[unit]") {
  Archive a(4);
  StreamingSource src(a.bytes, 300);
  src.fail_after = a.frames[2].compressed_offset;  // frames 0 and 1 are in, then the connection drops
  FrameSource fs(src, a.frames, no_frame_cache());
  std::string out(fs.span_bytes(0, 3), '\0');
  std::vector<uint32_t> handed;
  auto run = fs.read_run(0, 3, writable(out), 0, [&](uint32_t f) { handed.push_back(f); });
  CHECK(run.status.code() == ErrorCode::kUnavailable);
  CHECK(handed == std::vector<uint32_t>{0, 1});
  CHECK(run.frames[0].ok());
  CHECK(run.frames[1].ok());
  CHECK(run.frames[2].code() == ErrorCode::kUnavailable);
  CHECK(run.frames[3].code() == ErrorCode::kUnavailable);
}

TEST_CASE("frame source: with `ready` and a prefilled head, the head's frames go first, before any read", "[unit]") {
  Archive a(4);
  StreamingSource src(a.bytes, 400);
  FrameSource fs(src, a.frames, no_frame_cache());
  std::string out(fs.span_bytes(0, 3), '\0');
  const uint64_t head = a.frames[2].compressed_offset + 5;  // frames 0 and 1, and 5 bytes of frame 2
  std::memcpy(out.data(), a.bytes.data(), head);
  std::vector<uint32_t> handed;
  std::vector<size_t> in_when_handed;
  auto run = fs.read_run(0, 3, writable(out), head, [&](uint32_t f) {
    handed.push_back(f);
    in_when_handed.push_back(src.in);
  });
  REQUIRE(run.status.ok());
  CHECK(handed == std::vector<uint32_t>{0, 1, 2, 3});
  CHECK(in_when_handed[0] == 0);  // before the source sent a byte
  CHECK(in_when_handed[1] == 0);
  CHECK(out == a.bytes);
}

TEST_CASE("frame source: without `ready`, a failed read fails every frame, as before", "[unit]") {
  Archive a(3);
  StreamingSource src(a.bytes, 300);
  src.fail_after = a.frames[2].compressed_offset;
  FrameSource fs(src, a.frames, no_frame_cache());
  std::string out(fs.span_bytes(0, 2), '\0');
  auto run = fs.read_run(0, 2, writable(out));
  CHECK(run.status.code() == ErrorCode::kUnavailable);
  for (const Status& s : run.frames) CHECK(s.code() == ErrorCode::kUnavailable);
}
