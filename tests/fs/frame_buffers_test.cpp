// SPDX-License-Identifier: MIT
// FrameBuffers (fs/frame_buffers.h, issue 15: no zero-fill, no fresh pages per decode): a frame
// decodes to the bytes format's own decode gives, a released buffer is written over by the next
// decode (bytes still exact, also for a smaller frame in a larger buffer), damaged bytes fail
// with kCorrupt, and the free list stays within its bound until trim() empties it.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "fs/frame_buffers.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

struct Packed {
  TempDir dir;
  std::unique_ptr<format::ArchiveReader> reader;
  Packed() {
    testing::make_node_like_tree(dir / "t", 40);
    testing::pack_tree(dir.path(), {"t"}, dir / "a.tar.zst");
    reader = testing::open_archive_file(dir / "a.tar.zst");
    REQUIRE(reader->index().frames().size() >= 4);
  }
  const format::FrameInfo& info(uint32_t f) const { return reader->index().frames()[f]; }
  std::string compressed(uint32_t f) const {
    std::string buf(info(f).compressed_size, '\0');
    auto n = reader->source().read_at(info(f).compressed_offset, std::as_writable_bytes(std::span(buf.data(), buf.size())));
    REQUIRE(n.ok());
    REQUIRE(*n == buf.size());
    return buf;
  }
  std::string expected(uint32_t f) const {
    auto d = reader->read_frame(f);
    REQUIRE(d.ok());
    return *d;
  }
  Result<fs::FramePtr> decode(fs::FrameBuffers& b, uint32_t f, std::string bytes) const {
    return b.decode(info(f), f, std::as_bytes(std::span(bytes.data(), bytes.size())));
  }
};

}  // namespace

TEST_CASE("frames decode exactly into recycled buffers", "[unit]") {
  Packed p;
  fs::FrameBuffers buffers(2);
  // The largest frame first, so the smaller ones after it land in its larger buffer.
  uint32_t largest = 0;
  for (uint32_t f = 0; f < p.reader->index().frames().size(); ++f)
    if (p.info(f).uncompressed_size > p.info(largest).uncompressed_size) largest = f;
  const char* first_data = nullptr;
  {
    auto d = p.decode(buffers, largest, p.compressed(largest));
    REQUIRE(d.ok());
    CHECK(**d == p.expected(largest));
    first_data = (*d)->data();
  }
  CHECK(buffers.kept_bytes() > 0);  // released: back on the free list
  for (uint32_t f = 0; f < p.reader->index().frames().size(); ++f) {
    auto d = p.decode(buffers, f, p.compressed(f));
    REQUIRE(d.ok());
    INFO("frame " << f);
    CHECK((*d)->size() == p.info(f).uncompressed_size);
    CHECK(**d == p.expected(f));                    // nothing of the buffer's earlier frame shows through
    if (f == 0) CHECK((*d)->data() == first_data);  // written over, not allocated again
  }
  CHECK(buffers.reused() >= p.reader->index().frames().size());
}

TEST_CASE("damaged compressed bytes fail with kCorrupt and the buffers stay usable", "[unit]") {
  Packed p;
  fs::FrameBuffers buffers(2);
  std::string bad = p.compressed(1);
  bad[bad.size() / 2] ^= 0x40;
  auto d = p.decode(buffers, 1, bad);
  REQUIRE(!d.ok());
  CHECK(d.error().code() == ErrorCode::kCorrupt);
  CHECK(d.error().message().find("frame 1") != std::string::npos);
  auto short_bytes = p.decode(buffers, 1, p.compressed(1).substr(1));
  REQUIRE(!short_bytes.ok());
  CHECK(short_bytes.error().code() == ErrorCode::kCorrupt);
  auto good = p.decode(buffers, 1, p.compressed(1));
  REQUIRE(good.ok());
  CHECK(**good == p.expected(1));
}

TEST_CASE("the free list keeps at most its bound, and trim empties it", "[unit]") {
  Packed p;
  fs::FrameBuffers buffers(2);
  std::vector<fs::FramePtr> held;
  uint64_t largest_capacity = 0;
  for (uint32_t f = 0; f < 4; ++f) {
    auto d = p.decode(buffers, f, p.compressed(f));
    REQUIRE(d.ok());
    largest_capacity = std::max<uint64_t>(largest_capacity, (*d)->capacity());
    held.push_back(std::move(d).value());
  }
  CHECK(buffers.kept_bytes() == 0);  // all in use
  held.clear();
  CHECK(buffers.kept_bytes() > 0);
  CHECK(buffers.kept_bytes() <= 2 * largest_capacity);  // two of the four kept
  CHECK(buffers.trim() > 0);
  CHECK(buffers.kept_bytes() == 0);
}
