// SPDX-License-Identifier: MIT
// format/archive_head.h (issue 16 item 3, first bytes sooner): the first wave of a full extract's
// reads goes out before the archive is opened, and the pipeline takes the parts it covers from it
// instead of reading them again; its bytes are verified like any frame's, and a failed head read
// leaves its bytes to the pipeline's own read (the extract fails, with nothing left behind, only
// when that read fails too).
#include <sys/stat.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
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
// below `bad_below` (a corrupted read has its middle byte flipped), or, with `corrupt_at` set,
// flip the archive's byte there in every read that covers it (damage that a read again meets).
class RecordingSource final : public ByteSource {
 public:
  explicit RecordingSource(std::shared_ptr<const ByteSource> inner) : inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    {
      std::lock_guard lock(mu_);
      reads_.emplace_back(offset, out.size());
    }
    if (offset < bad_below && fail && fail_reads.fetch_sub(1) != 0) return Status(ErrorCode::kUnavailable, "injected: store unreachable");
    auto r = inner_->read_at(offset, out);
    if (r.ok() && corrupt_at != UINT64_MAX) {
      if (corrupt_at >= offset && corrupt_at < offset + *r) out[corrupt_at - offset] ^= std::byte{1};
    } else if (r.ok() && offset < bad_below && corrupt && !out.empty() && corrupt_reads.fetch_sub(1) != 0) {
      out[out.size() / 2] ^= std::byte{1};
    }
    return r;
  }
  std::string describe() const override { return "recording " + inner_->describe(); }
  std::vector<std::pair<uint64_t, uint64_t>> reads() const {
    std::lock_guard lock(mu_);
    return reads_;
  }
  uint64_t bad_below = 0;
  bool fail = false, corrupt = false;
  uint64_t corrupt_at = UINT64_MAX;
  mutable std::atomic<int> corrupt_reads{-1};  // with `corrupt`: how many reads are corrupted (-1: all)
  mutable std::atomic<int> fail_reads{-1};     // with `fail`: how many reads fail (-1: all)

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

TEST_CASE("ArchiveHead::plan: the auto plan's first wave, never into the tail, nothing for tiny archives", "[unit]") {
  CHECK(format::ArchiveHead::plan(300u << 10, 256u << 20, 0, 0).empty());
  auto p = format::ArchiveHead::plan(32u << 20, 256u << 20, 0, 0);  // the node archive's size
  REQUIRE(p.size() == 8);
  for (size_t k = 1; k < p.size(); ++k) CHECK(p[k] > p[k - 1]);  // ramped
  uint64_t sum = 0;
  for (auto n : p) sum += n;
  CHECK(sum < (32u << 20) - (256u << 10));
  auto explicit_plan = format::ArchiveHead::plan(64u << 20, 256u << 20, 2, 1u << 20);
  REQUIRE(explicit_plan.size() == 2);
  CHECK(explicit_plan[0] == (1u << 20));
}

TEST_CASE("ArchiveReader::open: a first read that holds the index opens in one read, a short one takes two", "[unit]") {
  Fixture f;
  const uint64_t size = f.source->size();
  // The size of the last read when the first read is too short: the seek table plus the index.
  auto two = format::ArchiveReader::open(f.source, 1024);
  REQUIRE(two.ok());
  auto reads = f.source->reads();
  REQUIRE(reads.size() == 2);
  CHECK(reads[0] == std::make_pair(size - 1024, uint64_t{1024}));
  const uint64_t tail_bytes = reads[1].second + 1024;
  REQUIRE(tail_bytes < size);

  Fixture g;  // a fresh record of reads
  auto one = format::ArchiveReader::open(g.source, tail_bytes + 4096);
  REQUIRE(one.ok());
  reads = g.source->reads();
  REQUIRE(reads.size() == 1);
  CHECK(reads[0].second == tail_bytes + 4096);  // (g's archive may differ from f's by a few bytes)
  CHECK((*one)->index().entry_count() == (*two)->index().entry_count());
}

TEST_CASE("the parts a head covers are not read again, and the tree is the source's", "[unit]") {
  Fixture fx;
  const uint64_t head_bytes = fx.source->size() / 2;
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{head_bytes / 3, head_bytes / 3, head_bytes / 3});
  fx.open();  // while the head is read
  const uint64_t covered = head->length();
  const size_t head_reads = 3;
  format::ExtractConfig config;
  config.head = head;
  config.part_size_bytes = 100u << 10;
  auto stats = extract_to(*fx.reader, fx.work / "out", config);
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  CHECK(compare_trees(fx.src / "r", fx.work / "out/r") == "");
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
  // The damage is the archive's, at the head's middle: every read of those bytes meets it (a
  // flip in the middle of each read would hit another frame on each read again, and a frame
  // that came in good once is used).
  if (corrupt) fx.source->corrupt_at = fx.source->size() / 8;
  else fx.source->fail = true;
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

// Extracts fx's archive through `head` (started before the open, as restore does) and checks
// that the tree is the source's.
static void extract_through(Fixture& fx, std::shared_ptr<format::ArchiveHead> head) {
  fx.open();  // while the head is read
  format::ExtractConfig config;
  config.head = std::move(head);
  auto stats = extract_to(*fx.reader, fx.work / "out", config);
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  CHECK(compare_trees(fx.src / "r", fx.work / "out/r") == "");
}

TEST_CASE("a head read corrupted on the way is read again from the source, the extract succeeds", "[unit]") {
  Fixture fx;
  fx.source->bad_below = 1;
  fx.source->corrupt = true;
  fx.source->corrupt_reads = 1;  // the head's read only; the pipeline's read of the part again is good
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{fx.source->size() / 4});
  extract_through(fx, head);
}

TEST_CASE("a head read that failed leaves its part to the source, and the extract succeeds", "[unit]") {
  Fixture fx;
  fx.source->bad_below = 1;
  fx.source->fail = true;
  fx.source->fail_reads = 1;  // the head's read only
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{fx.source->size() / 4});
  extract_through(fx, head);
}

TEST_CASE("a head piece reaching past the object's end keeps what it read, and no part is read again", "[unit]") {
  Fixture fx;
  const uint64_t size = fx.source->size();
  // As restore's early head is sized: before the object's size is known (tools/early_head.h).
  auto head = std::make_shared<format::ArchiveHead>(fx.source, std::vector<uint64_t>{size / 2, size, size});
  extract_through(fx, head);
  size_t frame_reads = 0;  // reads other than the head's three and the open's tail
  for (auto [off, len] : fx.source->reads())
    if (off != 0 && off != size / 2 && off != size / 2 + size && off + len != size) ++frame_reads;
  CHECK(frame_reads == 0);
}

// restore's early head (tools/early_head.h) reads by name before the lookup answers: its bytes
// may be another object's (replaced in between) or fewer than its pieces (a shorter object).
TEST_CASE("a head of another, shorter object: its frames fail their digests or its pieces come short, the source serves", "[unit]") {
  Fixture fx;
  Fixture other;  // another archive of the same tree: one file changed, other frame sizes
  write_file(other.src / "r/d0/f0", "changed before the lookup answered");
  format::PackConfig pc;
  pc.frame_size_bytes = 32u << 10;
  pack_paths(other.src.path(), {"r"}, other.work / "b.tar.zst", pc);
  auto file = LocalFileSource::open(other.work / "b.tar.zst");
  REQUIRE(file.ok());
  std::shared_ptr<const ByteSource> wrong(std::move(file).value());
  const uint64_t piece = fx.source->size() / 3;  // the last piece reaches past the other's end
  auto head = std::make_shared<format::ArchiveHead>(wrong, std::vector<uint64_t>{piece, piece, piece, piece * 4});
  extract_through(fx, head);
}

TEST_CASE("a failed head read fails the extract with the source's error when the source fails too", "[unit]") {
  Fixture fx;
  auto stats = extract_with_bad_head(fx, false);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.error().code() == ErrorCode::kUnavailable);
  CHECK_THAT(stats.error().message(), Catch::Contains("injected"));
}

// restore's lookup of an archive under 1 MiB read all of it: the pipeline copies every frame from
// those bytes (no second download), and a frame damaged in them is read again from the source.
TEST_CASE("a head of bytes in hand: frames are copied from it, a damaged one is read again", "[unit]") {
  for (bool damaged : {false, true}) {
    Fixture fx;
    std::string all(fx.source->size(), '\0');
    {
      auto r = fx.source->read_at(0, std::as_writable_bytes(std::span<char>(all)));
      REQUIRE(r.ok());
    }
    if (damaged) all[all.size() / 4] ^= 1;  // inside a frame (the index is at the end)
    fx.open();
    const size_t reads_before = fx.source->reads().size();
    format::ExtractConfig config;
    config.head = std::make_shared<format::ArchiveHead>(all);
    CHECK(config.head->length() == fx.source->size());
    auto stats = extract_to(*fx.reader, fx.work / (damaged ? "out-damaged" : "out"), config);
    INFO((stats.ok() ? std::string() : stats.error().to_string()));
    REQUIRE(stats.ok());
    CHECK(compare_trees(fx.src / "r", fx.work / (damaged ? "out-damaged/r" : "out/r")) == "");
    // Undamaged: no read at all; damaged: the one part holding that frame, from the source.
    CHECK(fx.source->reads().size() - reads_before == (damaged ? 1u : 0u));
  }
}
