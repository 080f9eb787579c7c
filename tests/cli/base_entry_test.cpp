// SPDX-License-Identifier: MIT
// tools/base_entry.h: the base of an incremental save opened with no request at all from the
// copy of its tail that mount kept (state_dir/base-tail, its digest in the record), with one
// ranged GET when the save record holds the entry's size and tail but no usable copy (issue 17),
// and as before (HEAD, then the reader's reads) from a record written before those lines.
#include "tools/base_entry.h"

#include <unistd.h>
#include <catch2/catch.hpp>
#include <string>

#include "common/posix_files.h"
#include "remote/testing/memory_object_store.h"
#include "tests/format/archive_test_util.h"
#include "tests/format/tree_util.h"

using namespace lazycache;
using namespace lazycache::cli;
using remote::testing::MemoryObjectStore;
using remote::testing::StoreOp;

namespace {

// An archive whose index is larger than the 256 KiB that ArchiveReader::open reads first (so
// opening it without the record takes two GETs), stored in `store` as "base".
remote::ObjectInfo store_base(MemoryObjectStore& store, const lazycache::testing::TempDir& dir, size_t files) {
  REQUIRE(make_dirs(dir / "t").ok());
  for (size_t i = 0; i < files; ++i)
    lazycache::testing::write_file(dir / ("t/file-with-a-long-name-" + std::to_string(i * 7919) + ".js"),
                                   lazycache::testing::pattern(40, i));
  lazycache::testing::pack_paths(dir.path(), {"t"}, dir / "a.tar.zst");
  auto bytes = read_whole_file(dir / "a.tar.zst", 1u << 30);
  REQUIRE(bytes.ok());
  return store.put_bytes("base", *bytes);
}

// The 10,000-file archive, packed once: the test case below runs again for each of its sections,
// and making and packing the files costs seconds each time (the test neared its timeout at load).
struct BigBase {
  lazycache::testing::TempDir dir;
  std::string bytes;
  BigBase() {
    MemoryObjectStore scratch;
    store_base(scratch, dir, 10000);
    auto got = scratch.get_bytes("base");
    REQUIRE(got.ok());
    bytes = std::move(*got);
  }
};
const BigBase& big_base() {
  static const BigBase base;
  return base;
}

}  // namespace

TEST_CASE("the base of an incremental save is opened with one GET from a full save record", "[unit]") {
  const BigBase& big = big_base();
  auto store = std::make_shared<MemoryObjectStore>();
  const remote::ObjectInfo info = store->put_bytes("base", big.bytes);
  auto local = lazycache::testing::open_archive(big.dir / "a.tar.zst");
  SaveRecord r;
  r.base_etag = info.etag;
  r.base_size = info.size;
  r.base_tail = base_tail_bytes(local->index(), info.size);
  REQUIRE(r.base_tail > 256 * 1024);  // the case that took three requests
  REQUIRE(r.base_tail < info.size);

  SECTION("one ranged GET, no HEAD") {
    auto base = open_base_entry(store, "base", r);
    INFO((base.ok() ? std::string() : base.error().to_string()));
    REQUIRE(base.ok());
    CHECK(store->calls(StoreOp::kHead) == 0);
    CHECK(store->calls(StoreOp::kGetRange) == 1);
    CHECK(base->reader->index().entry_count() == local->index().entry_count());
    CHECK(base->object.etag == info.etag);
    // Frames are read through the pinned source, not the prefetched tail.
    auto frame = base->reader->read_frame(0);
    REQUIRE(frame.ok());
    CHECK(*frame == *local->read_frame(0));
  }
  SECTION("a record from before base_size: HEAD, then the reader's two reads") {
    r.base_size = 0;
    r.base_tail = 0;
    auto base = open_base_entry(store, "base", r);
    REQUIRE(base.ok());
    CHECK(store->calls(StoreOp::kHead) == 1);
    CHECK(store->calls(StoreOp::kGetRange) == 2);
    CHECK(base->reader->index().entry_count() == local->index().entry_count());
  }
  SECTION("an entry replaced after the mount is not built on, with or without the new lines") {
    auto bytes = store->get_bytes("base");
    REQUIRE(bytes.ok());
    store->put_bytes("base", *bytes);  // the same bytes uploaded again: another ETag
    auto base = open_base_entry(store, "base", r);
    REQUIRE(!base.ok());
    CHECK(base.error().code() == ErrorCode::kPreconditionFailed);
    CHECK(base.error().message().find("was replaced after it was mounted") != std::string::npos);
    r.base_size = 0;
    auto old = open_base_entry(store, "base", r);
    REQUIRE(!old.ok());
    CHECK(old.error().code() == ErrorCode::kPreconditionFailed);
  }
  SECTION("a deleted entry: kNotFound") {
    REQUIRE(store->remove("base").ok());
    auto base = open_base_entry(store, "base", r);
    REQUIRE(!base.ok());
    CHECK(base.error().code() == ErrorCode::kNotFound);
  }
}

TEST_CASE("the base of an incremental save is opened from mount's copy of its tail, with no request", "[unit]") {
  const BigBase& big = big_base();
  auto store = std::make_shared<MemoryObjectStore>();
  const remote::ObjectInfo info = store->put_bytes("base", big.bytes);
  auto local = lazycache::testing::open_archive(big.dir / "a.tar.zst");
  lazycache::testing::TempDir state;
  SaveRecord r;
  r.path = "/w";
  r.primary_key = "k";
  r.state_dir = state.path();
  r.base_etag = info.etag;
  r.base_size = info.size;
  r.base_tail = base_tail_bytes(local->index(), info.size);
  const uint64_t len = base_tail_read_length(info.size, r.base_tail);
  REQUIRE(len == r.base_tail);  // over the 256 KiB the reader reads first
  auto digest = keep_base_tail_copy(state.path(), std::string_view(big.bytes).substr(big.bytes.size() - len));
  REQUIRE(digest.ok());
  r.base_tail_digest = *digest;
  // What mount records comes back from the record's text.
  auto back = SaveRecord::parse(r.to_text());
  REQUIRE(back.ok());
  CHECK(back->base_tail_digest == r.base_tail_digest);

  SECTION("no HEAD, no GET; frames still come from the store, pinned") {
    auto base = open_base_entry(store, "base", *back);
    INFO((base.ok() ? std::string() : base.error().to_string()));
    REQUIRE(base.ok());
    CHECK(base->tail_from_mount);
    CHECK(store->calls(StoreOp::kHead) == 0);
    CHECK(store->calls(StoreOp::kGetRange) == 0);
    CHECK(base->reader->index().entry_count() == local->index().entry_count());
    auto frame = base->reader->read_frame(0);
    REQUIRE(frame.ok());
    CHECK(*frame == *local->read_frame(0));
    CHECK(store->calls(StoreOp::kGetRange) == 1);
  }
  SECTION("a copy that is not the recorded bytes is not used: the tail is read from the store") {
    SECTION("damaged") {
      auto bytes = read_whole_file(base_tail_copy_path(state.path()), 1u << 30);
      REQUIRE(bytes.ok());
      (*bytes)[bytes->size() / 2] ^= 0x40;
      REQUIRE(replace_file(base_tail_copy_path(state.path()), *bytes).ok());
    }
    SECTION("short") {
      auto bytes = read_whole_file(base_tail_copy_path(state.path()), 1u << 30);
      REQUIRE(bytes.ok());
      REQUIRE(replace_file(base_tail_copy_path(state.path()), bytes->substr(1)).ok());
    }
    SECTION("gone") { REQUIRE(::unlink(base_tail_copy_path(state.path()).c_str()) == 0); }
    auto base = open_base_entry(store, "base", *back);
    REQUIRE(base.ok());
    CHECK(!base->tail_from_mount);
    CHECK(store->calls(StoreOp::kGetRange) == 1);
    CHECK(base->reader->index().entry_count() == local->index().entry_count());
  }
  SECTION("an entry replaced after the mount: the copy opens, the first pinned read says so") {
    store->put_bytes("base", big.bytes);  // the same bytes uploaded again: another ETag
    auto base = open_base_entry(store, "base", *back);
    REQUIRE(base.ok());
    auto frame = base->reader->read_frame(0);
    REQUIRE(!frame.ok());
    CHECK(frame.error().code() == ErrorCode::kPreconditionFailed);
  }
}

TEST_CASE("base_tail_bytes is what follows the last data frame, and a save record keeps it", "[unit]") {
  lazycache::testing::TempDir dir;
  auto store = std::make_shared<MemoryObjectStore>();
  const remote::ObjectInfo info = store_base(*store, dir, 20);
  auto local = lazycache::testing::open_archive(dir / "a.tar.zst");
  const auto frames = local->index().frames();
  const uint64_t tail = base_tail_bytes(local->index(), info.size);
  CHECK(tail == info.size - frames.back().compressed_offset - frames.back().compressed_size);
  SaveRecord r;
  r.path = "/w";
  r.primary_key = "k";
  r.base_etag = info.etag;
  r.base_size = info.size;
  r.base_tail = tail;
  auto back = SaveRecord::parse(r.to_text());
  REQUIRE(back.ok());
  CHECK(back->base_size == info.size);
  CHECK(back->base_tail == tail);
  // A small tail: the GET still covers the 256 KiB (here: the whole object) the reader reads first.
  auto base = open_base_entry(store, "base", *back);
  REQUIRE(base.ok());
  CHECK(store->calls(StoreOp::kGetRange) == 1);
  CHECK(store->calls(StoreOp::kHead) == 0);
  CHECK(!SaveRecord::parse("format=2\npath=/w\nprimary_key=k\nbase_tail=x\n").ok());
}
