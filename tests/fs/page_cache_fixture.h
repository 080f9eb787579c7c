// SPDX-License-Identifier: MIT
// Page-cache hand-off tests (Filesystem::add_page_cache_sink): a sink that records what it was
// offered, and a Filesystem over a packed test tree.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fs/filesystem.h"
#include "fs_read_util.h"
#include "fs_test_util.h"

namespace lazycache::testing {

// What the sinks were given: the last bytes offered per file whole (taken or not), the files
// taken whole, the pieces of files that span frames (offset -> the last bytes offered there),
// and how many calls. `take` false: the kernel refuses (an inode it does not know yet).
struct PageCacheRecorder {
  std::mutex mu;
  std::map<format::EntryId, std::string> got;
  std::set<format::EntryId> taken;
  std::map<format::EntryId, std::map<uint64_t, std::string>> pieces;
  uint64_t calls = 0;
  std::atomic<bool> take{true};

  // `index`: the archive's (a whole file is an offer of all of its bytes).
  fs::PageCacheSink sink(const format::Index& index) {
    return [this, &index](format::EntryId id, uint64_t offset, std::span<const char> bytes) {
      std::lock_guard lock(mu);
      ++calls;
      if (offset == 0 && bytes.size() == index.entry(id).size) {
        got[id].assign(bytes.data(), bytes.size());
        if (take) taken.insert(id);
      } else {
        pieces[id][offset].assign(bytes.data(), bytes.size());
      }
      return take.load();
    };
  }
  uint64_t call_count() {
    std::lock_guard lock(mu);
    return calls;
  }
};

struct PageCacheMount {
  TempDir dir;
  std::unique_ptr<fs::Filesystem> fs;

  // `build` makes the tree under dir/t; 64 KiB frames; a chunk cache; `config` with idle_trim_ms
  // 0 (memory figures must not depend on the clock).
  template <typename Build>
  explicit PageCacheMount(Build&& build, fs::FilesystemConfig config = {}) {
    build(dir / "t");
    pack_tree(dir.path(), {"t"}, dir / "a.tar.zst");
    auto cache = fs::ChunkCache::open({dir / "cache", 1ull << 30});
    REQUIRE(cache.ok());
    config.idle_trim_ms = 0;
    fs = std::make_unique<fs::Filesystem>(open_archive_file(dir / "a.tar.zst"), *cache, config);
  }

  const format::Index& index() const { return fs->index(); }
  // Canonical regular files with data, in archive path order.
  std::vector<format::EntryId> files() const {
    std::vector<format::EntryId> out;
    for (format::EntryId id = 0; id < index().entry_count(); ++id) {
      const format::Entry e = index().entry(id);
      if (e.type == format::EntryType::kRegular && e.size > 0 && e.link_group == id) out.push_back(id);
    }
    return out;
  }
  std::string content(format::EntryId id) const { return read_file(dir / index().path(id)); }
  // What `find` does through a mount: readdirplus describes every entry to the kernel.
  void describe_all() {
    for (format::EntryId id = 0; id < index().entry_count(); ++id) REQUIRE(fs->getattr(id).ok());
  }
  void read_all_and_check() {
    for (format::EntryId id : files()) REQUIRE(read_whole(*fs, index().path(id)) == content(id));
    fs->wait_prefetch_idle();  // hand-offs run on the fetch threads after the replies
  }
  // Whether file data lies in frame `f`, and whether a file lies in it and in a neighbour too
  // (then the frame cannot be dropped).
  struct FrameUse {
    bool has_file = false, shared_with_neighbour = false;
  };
  FrameUse use_of(uint32_t f) const {
    const format::FrameInfo& info = index().frames()[f];
    const uint64_t begin = info.uncompressed_offset, end = begin + info.uncompressed_size;
    FrameUse u;
    for (format::EntryId id : files()) {
      const format::Entry e = index().entry(id);
      const uint64_t a = e.data_offset, b = e.data_offset + e.size;
      if (a >= end || b <= begin) continue;
      u.has_file = true;
      u.shared_with_neighbour = u.shared_with_neighbour || a < begin || b > end;
    }
    return u;
  }
  // The pieces `rec` was offered of `id`, a file that spans frames: each starts on a page
  // boundary and is whole pages (or ends the file), none overlaps another, each holds the file's
  // bytes; with `complete` (every frame of the file was decoded) they are all of the file.
  void check_pieces(PageCacheRecorder& rec, format::EntryId id, bool complete = true) const {
    INFO(index().path(id));
    fs->wait_late_hand_offs();  // they run on a thread of their own
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::string want = content(id);
    std::lock_guard lock(rec.mu);
    if (!complete && !rec.pieces.contains(id)) return;
    REQUIRE(rec.pieces.contains(id));
    uint64_t next = 0;
    for (const auto& [offset, bytes] : rec.pieces.at(id)) {
      CHECK(offset % page == 0);
      CHECK((complete ? offset == next : offset >= next));
      CHECK((bytes.size() % page == 0 || offset + bytes.size() == want.size()));
      CHECK(bytes == want.substr(offset, bytes.size()));
      next = offset + bytes.size();
    }
    if (complete) CHECK(next == want.size());
  }
  bool wholly_in_one_frame(format::EntryId id) const {
    const format::Entry e = index().entry(id);
    const auto [a, b] = index().frames_for_range(e.data_offset, e.size);
    return a == b;
  }
};

}  // namespace lazycache::testing
