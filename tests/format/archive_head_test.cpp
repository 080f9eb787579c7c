// SPDX-License-Identifier: MIT
// format/archive_head.h (issue 16 item 3, first bytes sooner): the first wave of a full extract's
// reads goes out before the archive is opened, and the pipeline takes the parts it covers from it
// instead of reading them again; its bytes are verified like any frame's, and a failed head read
// fails the extract with nothing left behind.
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "archive_test_util.h"
#include "format/archive_head.h"
#include "format/extractor.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

namespace {

// A ByteSource over a file that records every read and can fail or corrupt reads starting
// below `bad_below`.
class RecordingSource final : public ByteSource {
 public:
  explicit RecordingSource(std::shared_ptr<const ByteSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    {
      std::lock_guard lock(mu_);
      reads_.emplace_back(offset, out.size());
    }
    if (offset < bad_below && fail) return Status(ErrorCode::kUnavailable, "injected: store unreachable");
    auto r = inner_->read_at(offset, out);
    if (r.ok() && offset < bad_below && corrupt && !out.empty()) out[out.size() / 2] ^= std::byte{1};
    return r;
  }
  std::string describe() const override { return "recording " + inner_->describe(); }
  std::vector<std::pair<uint64_t, uint64_t>> reads() const {
    std::lock_guard lock(mu_);
    return reads_;
  }
  uint64_t bad_below = 0;
  bool fail = false, corrupt = false;

 private:
  std::shared_ptr<const ByteSource> inner_;
  mutable std::mutex mu_;
  mutable std::vector<std::pair<uint64_t, uint64_t>> reads_;
};

struct Fixture {
  TempDir src, work;
  std::shared_ptr<RecordingSource> source;
  std::unique_ptr<format::ArchiveReader> reader;
  Fixture() {
    REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
    for (int d = 0; d < 6; ++d) {
      REQUIRE(::mkdir((src / ("r/d" + std::to_string(d))).c_str(), 0755) == 0);
      for (int f = 0; f < 20; ++f)
        write_file(src / ("r/d" + std::to_string(d) + "/f" + std::to_string(f)),
                   pattern(20000 + 997 * f, static_cast<uint64_t>(d * 20 + f)));
    }
    format::PackConfig pc;
    pc.frame_size_bytes = 64u << 10;  // about 40 frames
    pack_paths(src.path(), {"r"}, work / "a.tar.zst", pc);
    auto file = LocalFileSource::open(work / "a.tar.zst");
    REQUIRE(file.ok());
    source = std::make_shared<RecordingSource>(std::shared_ptr<const ByteSource>(std::move(file).value()));
  }
  void open() {
    auto r = format::ArchiveReader::open(source);
    REQUIRE(r.ok());
    reader = std::move(r).value();
  }
};

}  // namespace

// Extracts fx's archive through `head` in 100 KiB parts; the tree must be the source's.
static void extract_through(Fixture& fx, std::shared_ptr<format::ArchiveHead> head) {
  format::ExtractConfig config;
  config.head = std::move(head);
  config.part_size_bytes = 100u << 10;
  auto stats = extract_to(*fx.reader, fx.work / "out", config);
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  CHECK(compare_trees(fx.src / "r", fx.work / "out/r") == "");
}

TEST_CASE("ArchiveHead::plan: the auto plan's first reads, never into the tail, nothing for tiny archives", "[unit]") {
  CHECK(format::ArchiveHead::plan(300u << 10, 256u << 20, 0, 0).empty());
  const uint64_t node = 32u << 20;  // about the node archive's size
  auto p = format::ArchiveHead::plan(node, 256u << 20, 0, 0);
  REQUIRE(p.size() == format::ArchiveHead::kAutoWaveReads);
  for (size_t k = 1; k < p.size(); ++k) CHECK(p[k] > p[k - 1]);  // ramped
  uint64_t sum = 0;
  for (auto n : p) sum += n;
  CHECK(sum <= node - format::ArchiveHead::tail_plan(node));
  auto explicit_plan = format::ArchiveHead::plan(64u << 20, 256u << 20, 2, 1u << 20);
  REQUIRE(explicit_plan.size() == 2);  // an explicit plan: a whole wave
  CHECK(explicit_plan[0] == (1u << 20));
}

TEST_CASE("ArchiveHead::tail_plan: a 24th of the archive, 256 KiB to 2 MiB, never more than the object", "[unit]") {
  CHECK(format::ArchiveHead::tail_plan(100u << 10) == (100u << 10));
  CHECK(format::ArchiveHead::tail_plan(1u << 20) == (256u << 10));
  CHECK(format::ArchiveHead::tail_plan(32759883) == 32759883 / 24);  // node: holds its 929 KB index
  CHECK(format::ArchiveHead::tail_plan(1ull << 30) == (2u << 20));
}

TEST_CASE("with a tail, the archive opens from the head's one tail read, and frames in it are not read again", "[unit]") {
  Fixture fx;
  const uint64_t size = fx.source->size();
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{size / 4}, size / 2);
  REQUIRE(head->tail_offset() == size - size / 2);
  auto r = format::ArchiveReader::open(head->reader_source());
  REQUIRE(r.ok());
  fx.reader = std::move(r).value();
  for (auto [off, len] : fx.source->reads()) CHECK((off == 0 || off == head->tail_offset()));  // opening read nothing itself
  extract_through(fx, head);
  // Besides the head's reads, only the middle was read: nothing at or past the tail's start, and
  // nothing below the front's end.
  for (auto [off, len] : fx.source->reads()) {
    if (off == 0 || off == head->tail_offset()) continue;  // the head's own
    CHECK(off >= head->length());
    CHECK(off + len <= head->tail_offset());
  }
}

TEST_CASE("a failed tail read fails opening with the source's error", "[unit]") {
  Fixture fx;
  fx.source->bad_below = UINT64_MAX;  // every read fails
  fx.source->fail = true;
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{}, 64u << 10);
  auto r = format::ArchiveReader::open(head->reader_source());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == ErrorCode::kUnavailable);
}

TEST_CASE("the parts a head covers are not read again, and the tree is the source's", "[unit]") {
  Fixture fx;
  const uint64_t head_bytes = fx.source->size() / 2;
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{head_bytes / 3, head_bytes / 3, head_bytes / 3});
  fx.open();  // while the head is read
  const uint64_t covered = head->length();
  const size_t head_reads = 3;
  extract_through(fx, head);
  // Reads: the head's three, the tail, and parts from where the head ends (a part straddling it
  // reads only its rest).
  size_t below = 0;
  for (auto [off, len] : fx.source->reads())
    if (off < covered) ++below;
  CHECK(below == head_reads);
}

// Extracts through a head whose one read (from byte 0, which only the head reads: the pipeline
// takes those bytes from it) is corrupted or fails; the staged target must be gone afterwards.
static Result<format::ExtractStats> extract_with_bad_head(Fixture& fx, bool corrupt) {
  fx.source->bad_below = 1;
  (corrupt ? fx.source->corrupt : fx.source->fail) = true;
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{fx.source->size() / 4});
  fx.open();
  format::ExtractConfig config;
  config.head = head;
  auto stats = extract_to(*fx.reader, fx.work / "out", config);
  struct stat st;
  CHECK(::lstat((fx.work / "out").c_str(), &st) != 0);  // the staged target was removed
  return stats;
}

TEST_CASE("head bytes are verified: a corrupted head read fails the extract and leaves nothing", "[unit]") {
  Fixture fx;
  auto stats = extract_with_bad_head(fx, true);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.error().code() == ErrorCode::kCorrupt);
}

TEST_CASE("a failed head read fails the extract with the source's error", "[unit]") {
  Fixture fx;
  auto stats = extract_with_bad_head(fx, false);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.error().code() == ErrorCode::kUnavailable);
  CHECK_THAT(stats.error().message(), Catch::Contains("injected"));
}
