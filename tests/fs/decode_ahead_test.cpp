// SPDX-License-Identifier: MIT
// Decode-ahead (FilesystemConfig::decode_ahead_bytes, issue 15): a fill frame whose files the
// kernel knows (note_known: the adapter sent a reply naming them) is decoded as it arrives and its
// files handed to the page-cache sinks with their exact bytes; one whose files nobody knows is
// only stored; a frame the fill stored before its files were known is decoded from the chunk
// cache once they are (no second store read), also by the pass at the end of the tree walk
// (decode_known_ahead); a frame decoded ahead is never kept in memory for files the kernel did not
// take; frames turned away while the ahead share of the memory budget is full are decoded when it
// has room again, and frames read ahead that nobody reads do not hold them off; the byte cap holds; frames outside the fill are never fetched for it; a frame is
// decoded ahead at most once; and off means off.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fs/filesystem.h"
#include "page_cache_fixture.h"

using namespace lazycache;

namespace {

using Recorder = testing::PageCacheRecorder;

fs::FilesystemConfig decode_ahead_config(uint64_t decode_ahead_bytes, fs::FillPolicy fill) {
  fs::FilesystemConfig config;
  config.fill = fill;
  config.decode_ahead_bytes = decode_ahead_bytes;
  return config;
}

struct Mounted : testing::PageCacheMount {
  Recorder rec;

  // The whole archive filled unless `fill` says.
  template <typename Build>
  Mounted(Build&& build, uint64_t decode_ahead_bytes, fs::FillPolicy fill = {fs::FillPolicy::Mode::kAll, 0})
      : PageCacheMount(build, decode_ahead_config(decode_ahead_bytes, fill)) {
    fs->add_page_cache_sink(&rec, rec.sink(fs->index()));
  }
  template <typename Build>
  Mounted(Build&& build, fs::FilesystemConfig config) : PageCacheMount(build, config) {
    fs->add_page_cache_sink(&rec, rec.sink(fs->index()));
  }
  ~Mounted() { fs->remove_page_cache_sink(&rec); }

  // What the tree walk does through a mount: every entry described, and the replies sent.
  void know_all() {
    for (format::EntryId id = 0; id < index().entry_count(); ++id) {
      REQUIRE(fs->getattr(id).ok());
      fs->note_known(id);
    }
  }
  void fill() {
    fs->start_prefetch(fs::PrefetchMode::kHotList);
    fs->wait_prefetch_idle();
  }
  // Every file the sinks got has its exact bytes.
  void check_handed_bytes() {
    std::lock_guard lock(rec.mu);
    for (format::EntryId id : rec.taken) REQUIRE(rec.got.at(id) == content(id));
  }
};

void node_tree(const std::string& root) { testing::make_node_like_tree(root, 60); }

// Many small files only: every frame is worth decoding ahead and can be taken whole.
void small_files_tree(const std::string& root) {
  ::mkdir(root.c_str(), 0755);
  for (int d = 0; d < 8; ++d) {
    const std::string dir = root + "/d" + std::to_string(d);
    ::mkdir(dir.c_str(), 0755);
    for (int f = 0; f < 40; ++f) {
      testing::write_file(dir + "/f" + std::to_string(f) + ".js", testing::pattern(1500 + static_cast<size_t>(f) * 97, 31u * d + f));
    }
  }
}

// A file of 24 frames first in archive order, then the small files.
void big_file_first_tree(const std::string& root) {
  small_files_tree(root);
  ::mkdir((root + "/a").c_str(), 0755);
  testing::write_file(root + "/a/big.bin", testing::pattern(24 * (64 << 10), 99));
}

}  // namespace

TEST_CASE("decode-ahead: fill frames whose files the kernel knows are decoded as they arrive and handed off whole", "[unit]") {
  Mounted m(small_files_tree, 1ull << 30);
  m.know_all();
  m.fill();
  const fs::MountStats s = m.fs->stats();
  INFO("frames " << s.archive_frames << ", decoded " << s.frames_decoded << ", ahead " << s.frames_decoded_ahead);
  REQUIRE(s.archive_frames > 3);
  // Every data frame was decoded once, ahead, and every file went to the sink with its bytes.
  CHECK(s.frames_decoded_ahead >= s.archive_frames - 1);  // the last frame may hold only the end of the tar
  CHECK(s.frames_decoded == s.frames_decoded_ahead);
  CHECK(m.rec.taken.size() == m.files().size());
  m.check_handed_bytes();
  // Handed off whole, so nothing stays in memory.
  CHECK(s.memory_used_bytes == 0);
  CHECK(s.decode_ahead_bytes > 0);
  // Reading a file afterwards is exact (decoded again from the chunk cache: no kernel here).
  const format::EntryId first = m.files().front();
  CHECK(testing::read_whole(*m.fs, m.index().path(first)) == m.content(first));
  CHECK(m.fs->stats().frames_from_store == s.frames_from_store);
}

TEST_CASE("decode-ahead: frames whose files nobody knows are only stored", "[unit]") {
  Mounted m(small_files_tree, 1ull << 30);
  m.fill();
  const fs::MountStats s = m.fs->stats();
  CHECK(s.frames_decoded == 0);
  CHECK(s.frames_decoded_ahead == 0);
  CHECK(m.rec.calls == 0);
  CHECK(s.prefetched_frames >= s.archive_frames - 1);
}

TEST_CASE("decode-ahead: frames stored before their files were known are decoded from the chunk cache once they are", "[unit]") {
  Mounted m(small_files_tree, 1ull << 30);
  m.fill();
  const fs::MountStats before = m.fs->stats();
  REQUIRE(before.frames_decoded == 0);
  m.know_all();  // each frame queued as its last file becomes known
  m.fs->wait_prefetch_idle();
  const fs::MountStats after = m.fs->stats();
  CHECK(after.frames_decoded_ahead >= after.archive_frames - 1);
  CHECK(after.store_range_reads == before.store_range_reads);  // from the chunk cache, not the store
  CHECK(m.rec.taken.size() == m.files().size());
  m.check_handed_bytes();
  // Knowing them again decodes nothing more: a frame is decoded ahead at most once.
  m.know_all();
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  CHECK(m.fs->stats().frames_decoded == after.frames_decoded);
}

TEST_CASE("decode-ahead: the walk's end pass decodes frames whose files were described without a note", "[unit]") {
  Mounted m(small_files_tree, 1ull << 30);
  m.fill();
  for (format::EntryId id = 0; id < m.index().entry_count(); ++id) REQUIRE(m.fs->getattr(id).ok());  // described only
  m.fs->wait_prefetch_idle();
  REQUIRE(m.fs->stats().frames_decoded == 0);
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  const fs::MountStats s = m.fs->stats();
  CHECK(s.frames_decoded_ahead >= s.archive_frames - 1);
  CHECK(m.rec.taken.size() == m.files().size());
  m.check_handed_bytes();
}

TEST_CASE("decode-ahead: a frame decoded ahead is not kept for the files the kernel did not take", "[unit]") {
  Mounted m(node_tree, 1ull << 30);  // large files reach across frames
  m.know_all();
  m.fill();
  const fs::MountStats s = m.fs->stats();
  REQUIRE(s.frames_decoded_ahead > 0);
  CHECK(s.memory_used_bytes == 0);
  m.check_handed_bytes();
  // Every small file was handed off whole; a file that spans frames never whole, only the whole
  // pages of its frames that were decoded ahead (for the small files that share them: a frame
  // that holds only a big file's bytes is not worth decoding ahead).
  for (format::EntryId id : m.files()) {
    INFO(m.index().path(id));
    if (!m.wholly_in_one_frame(id)) {
      CHECK(m.rec.got.count(id) == 0);
      m.check_pieces(m.rec, id, false);
    }
  }
  // Their reads are exact all the same.
  for (format::EntryId id : m.files()) REQUIRE(testing::read_whole(*m.fs, m.index().path(id)) == m.content(id));
}

TEST_CASE("decode-ahead: a frame is decoded ahead at most once; one whose known files the kernel refused stays for the late hand-off",
          "[unit]") {
  Mounted m(small_files_tree, 1ull << 30);
  m.rec.take = false;
  m.know_all();
  m.fill();
  const fs::MountStats first = m.fs->stats();
  REQUIRE(first.frames_decoded_ahead > 0);
  // Refused files the kernel was told of: the frames stay for their late hand-off (note_known).
  CHECK(first.memory_used_bytes > 0);
  // The files are still known and not handed: the end pass must not decode the frames again
  // (the job's own read of such a file decodes its frame anyway).
  m.rec.take = true;
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  CHECK(m.fs->stats().frames_decoded == first.frames_decoded);
  // An open (note_known again) hands a refused file off late, from the frame kept for it.
  const format::EntryId id = m.files().front();
  m.fs->note_known(id);
  m.fs->wait_late_hand_offs();
  {
    std::lock_guard lock(m.rec.mu);
    REQUIRE(m.rec.taken.count(id) == 1);
    CHECK(m.rec.got[id] == m.content(id));
  }
  CHECK(m.fs->stats().frames_decoded == first.frames_decoded);
}

TEST_CASE("decode-ahead: frames turned away while the ahead share is full are decoded once it has room again", "[unit]") {
  // A budget whose ahead share (a quarter) holds one 64 KiB frame at a time: the end pass queues
  // every frame at once, the fill's workers take several together, and all but one find no room.
  fs::FilesystemConfig config = decode_ahead_config(1ull << 30, {fs::FillPolicy::Mode::kAll, 0});
  config.memory_budget_bytes = 4 * (80 << 10);
  Mounted m(small_files_tree, config);
  m.fs->start_prefetch(fs::PrefetchMode::kHotList);
  m.fs->wait_prefetch_idle();
  REQUIRE(m.fs->stats().frames_decoded == 0);  // stored only: nobody knew the files yet
  m.describe_all();
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  const fs::MountStats s = m.fs->stats();
  INFO("frames " << s.archive_frames << ", decoded ahead " << s.frames_decoded_ahead);
  REQUIRE(s.archive_frames > 8);
  CHECK(s.frames_decoded_ahead >= s.archive_frames - 1);  // the last frame may hold only the end of the tar
  CHECK(m.rec.taken.size() == m.files().size());
  CHECK(s.memory_peak_bytes <= config.memory_budget_bytes);
}

TEST_CASE("decode-ahead: frames read ahead and never read do not hold it off", "[unit]") {
  // A job that reads the start of a large file (`tsc --version`) leaves the frames readahead
  // decoded for it in memory, held ahead until a read comes that never does. They fill the ahead
  // share; decode-ahead frames, which go to the page cache and are dropped at once, must still
  // be decoded (until session 41 every one of them was turned away for the rest of the mount).
  fs::FilesystemConfig config = decode_ahead_config(1ull << 30, {fs::FillPolicy::Mode::kAll, 0});
  config.memory_budget_bytes = 4 * (80 << 10);  // an ahead share of one 64 KiB frame
  Mounted m(big_file_first_tree, config);
  m.fs->start_prefetch(fs::PrefetchMode::kHotList);
  m.fs->wait_prefetch_idle();
  REQUIRE(m.fs->stats().frames_decoded == 0);  // stored only: nobody knew the files yet

  // The start of the big file, read sequentially: readahead decodes the frames after it, which
  // nobody reads.
  auto big = m.index().lookup_path("t/a/big.bin");
  REQUIRE(big.has_value());
  auto handle = m.fs->open(*big, O_RDONLY);
  REQUIRE(handle.ok());
  for (uint64_t off = 0; off < (128 << 10); off += 32 << 10) REQUIRE(m.fs->read_sync(*handle, off, 32 << 10).ok());
  m.fs->wait_prefetch_idle();
  const uint64_t decoded_for_reads = m.fs->stats().frames_decoded;
  REQUIRE(decoded_for_reads >= 3);  // the frames read, and at least one read ahead

  m.describe_all();
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  m.fs->release(*handle);
  const fs::MountStats s = m.fs->stats();
  // Every frame past the big file holds small files only.
  const auto [big_first, big_last] = m.index().frames_for_range(m.index().entry(*big).data_offset, m.index().entry(*big).size);
  uint32_t small_frames = 0;
  for (uint32_t f = big_last + 1; f < s.archive_frames; ++f) small_frames += m.use_of(f).has_file ? 1 : 0;
  INFO("frames " << s.archive_frames << ", big file " << big_first << ".." << big_last << ", decoded ahead " << s.frames_decoded_ahead);
  REQUIRE(small_frames > 4);
  CHECK(s.frames_decoded_ahead >= small_frames - 1);  // the frame the big file ends in may be decoded for a read
  std::lock_guard lock(m.rec.mu);
  for (format::EntryId id : m.files()) {
    if (id != *big) CHECK(m.rec.taken.count(id) == 1);
  }
}

TEST_CASE("decode-ahead: the byte cap holds", "[unit]") {
  const uint64_t cap = 3 * (64 << 10);  // three frames' worth
  Mounted m(small_files_tree, cap);
  m.know_all();
  m.fill();
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  const fs::MountStats s = m.fs->stats();
  CHECK(s.frames_decoded_ahead > 0);
  CHECK(s.frames_decoded_ahead + 2 < s.archive_frames);
  CHECK(s.decode_ahead_bytes <= cap);
}

TEST_CASE("decode-ahead: frames outside the fill are never fetched for it", "[unit]") {
  Mounted m(small_files_tree, 1ull << 30, fs::FillPolicy{fs::FillPolicy::Mode::kNone, 0});
  m.know_all();
  m.fill();
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  const fs::MountStats s = m.fs->stats();
  CHECK(s.store_range_reads == 0);
  CHECK(s.frames_decoded == 0);
}

TEST_CASE("decode-ahead off: fill frames are only stored, even when known", "[unit]") {
  Mounted m(small_files_tree, 0);
  m.know_all();
  m.fill();
  m.fs->decode_known_ahead();
  m.fs->wait_prefetch_idle();
  const fs::MountStats s = m.fs->stats();
  CHECK(s.frames_decoded == 0);
  CHECK(s.frames_decoded_ahead == 0);
  CHECK(m.rec.calls == 0);
}
