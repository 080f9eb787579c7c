// SPDX-License-Identifier: MIT
// fs::Overlay without FUSE (issue 15, writable mounts): the page-cache hand-off's filter
// (Overlay::offer_to_page_cache: archive files offered as their inode, never one copied up,
// opened for writing, truncated or made over a whiteout; a cut-off waits for a hand-off in
// flight), PageCacheGate itself, and the remembered "no upper directory here" answers, which
// every change that makes a directory in upper/ must invalidate (a stale answer would show the
// archive's file instead of its copy).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "format/archive_test_util.h"
#include "fs/fs_test_util.h"
#include "fs/overlay.h"
#include "fs/page_cache_gate.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

struct World {
  TempDir dir;
  std::unique_ptr<fs::Filesystem> lower;
  std::unique_ptr<fs::Overlay> overlay;

  World() {
    testing::make_node_like_tree(dir / "t", 12);
    format::PackConfig cfg;
    cfg.frame_size_bytes = 32 << 10;
    testing::pack_paths(dir.path(), {"t"}, dir / "a.tar.zst", cfg);
    lower = std::make_unique<fs::Filesystem>(testing::open_archive(dir / "a.tar.zst"), nullptr);
    auto root = lower->index().lookup_path("t");
    REQUIRE(root);
    auto o = fs::Overlay::open(*lower, *root, fs::OverlayConfig{dir / "state"});
    REQUIRE(o.ok());
    overlay = std::move(o).value();
  }

  // Walks "a/b/c" with lookup(), as the kernel does; 0 when a name is missing.
  uint64_t ino(const std::string& rel) {
    uint64_t at = fs::Overlay::kRootIno;
    size_t pos = 0;
    while (pos <= rel.size()) {
      const size_t slash = rel.find('/', pos);
      auto e = overlay->lookup(at, rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos));
      if (!e.ok()) return 0;
      at = e->ino;
      if (slash == std::string::npos) break;
      pos = slash + 1;
    }
    return at;
  }
  uint64_t parent(const std::string& rel) { return ino(rel.substr(0, rel.rfind('/'))); }
  fs::EntryId archive_id(const std::string& rel) {
    auto id = lower->index().lookup_path("t/" + rel);
    REQUIRE(id);
    return lower->canonical(*id);
  }
  // What a hand-off of `rel`'s archive entry does now: the inode it was stored as, or 0.
  uint64_t offer(const std::string& rel) {
    uint64_t stored = 0;
    const bool took = overlay->offer_to_page_cache(archive_id(rel), [&](uint64_t i) {
      stored = i;
      return true;
    });
    CHECK(took == (stored != 0));
    return stored;
  }
  Status write(const std::string& rel, const std::string& data, int flags = O_WRONLY) {
    LC_ASSIGN_OR_RETURN(uint64_t h, overlay->open(ino(rel), flags));
    auto n = overlay->write(h, std::span<const char>(data.data(), data.size()), 0);
    overlay->release(h);
    return n.status();
  }
  std::string read(const std::string& rel) {
    auto h = overlay->open(ino(rel), O_RDONLY);
    REQUIRE(h.ok());
    auto bytes = overlay->read_sync(*h, 0, 1 << 20);
    overlay->release(*h);
    REQUIRE(bytes.ok());
    return *bytes;
  }
};

}  // namespace

TEST_CASE("page-cache gate: begin refused after cut_off or mark; cut_off waits for a hand-off in flight", "[unit]") {
  fs::PageCacheGate gate;
  CHECK(gate.begin(7));
  gate.end(7);
  gate.mark(8);
  CHECK_FALSE(gate.begin(8));
  CHECK(gate.begin(9));  // another inode is not affected

  REQUIRE(gate.begin(7));  // a hand-off of 7 in flight
  std::atomic<bool> cut{false};
  std::thread cutter([&] {
    gate.cut_off(7);
    cut = true;
  });
  while (!gate.is_cut_off(7)) std::this_thread::yield();
  CHECK_FALSE(cut.load());     // marked, but waiting: the hand-off of 7 has not ended
  CHECK_FALSE(gate.begin(7));  // and no new one starts
  gate.end(7);
  cutter.join();
  CHECK(cut.load());
  gate.end(9);
}

TEST_CASE("overlay hand-off: an archive file goes as its inode; copied-up, written, truncated and re-created ones never", "[unit]") {
  World w;
  const std::string untouched = "node_modules/pkg-1/index.js";
  CHECK(w.offer(untouched) == w.ino(untouched));

  const std::string written = "node_modules/pkg-2/index.js";
  const uint64_t written_ino = w.ino(written);
  REQUIRE(w.write(written, "new").ok());
  CHECK(w.overlay->page_cache_cut_off(written_ino));
  CHECK(w.offer(written) == 0);

  const std::string chmodded = "node_modules/pkg-3/index.js";  // copy-up without a content change
  fs::SetAttr mode;
  mode.mode = 0600;
  REQUIRE(w.overlay->setattr(w.ino(chmodded), mode, std::nullopt).ok());
  CHECK(w.offer(chmodded) == 0);

  const std::string truncated = "node_modules/pkg-4/index.js";
  fs::SetAttr shrink;
  shrink.size = 10;
  REQUIRE(w.overlay->setattr(w.ino(truncated), shrink, std::nullopt).ok());
  CHECK(w.offer(truncated) == 0);

  // Unlinked (whited out) and made again at the same name: the new file is cut off; the old
  // inode, which an open descriptor may still read, keeps the archive's bytes.
  const std::string recreated = "node_modules/pkg-5/index.js";
  const uint64_t old_ino = w.ino(recreated);
  const uint64_t dir = w.parent(recreated);
  REQUIRE(w.overlay->unlink(dir, "index.js").ok());
  auto made = w.overlay->create(dir, "index.js", 0644, O_WRONLY, fs::Caller{});
  REQUIRE(made.ok());
  w.overlay->release(made->second);
  CHECK(w.overlay->page_cache_cut_off(made->first.ino));
  CHECK(made->first.ino != old_ino);
  CHECK(w.offer(recreated) == old_ino);

  // Opened for reading only: still the archive's bytes.
  auto h = w.overlay->open(w.ino(untouched), O_RDONLY);
  REQUIRE(h.ok());
  w.overlay->release(*h);
  CHECK(w.offer(untouched) == w.ino(untouched));
}

TEST_CASE("overlay hand-off: opening a file for writing waits for its hand-off in flight", "[unit]") {
  World w;
  const std::string rel = "node_modules/pkg-6/index.js";
  const uint64_t ino = w.ino(rel);
  std::atomic<bool> in_store{false}, let_go{false}, opened{false};
  std::thread hand_off([&] {
    w.overlay->offer_to_page_cache(w.archive_id(rel), [&](uint64_t) {
      in_store = true;
      while (!let_go) std::this_thread::yield();
      return true;
    });
  });
  while (!in_store) std::this_thread::yield();
  std::thread writer([&] {
    auto h = w.overlay->open(ino, O_WRONLY);
    CHECK(h.ok());
    if (h.ok()) w.overlay->release(*h);
    opened = true;
  });
  while (!w.overlay->page_cache_cut_off(ino)) std::this_thread::yield();
  CHECK_FALSE(opened.load());  // the open is held until the archive bytes are in the kernel
  let_go = true;
  hand_off.join();
  writer.join();
  CHECK(opened.load());
  CHECK(w.offer(rel) == 0);
}

TEST_CASE("overlay: remembered 'no upper directory' answers end when upper/ gains one", "[unit]") {
  World w;
  // Looked up and stat'ed first, so the answers for pkg-7, pkg-8 and pkg-9 are remembered.
  const std::string a = "node_modules/pkg-7/index.js", b = "node_modules/pkg-8/index.js";
  const std::string c = "node_modules/pkg-9/lib/util.js";
  for (const std::string& rel : {a, b, c}) {
    REQUIRE(w.ino(rel) != 0);
    REQUIRE(w.overlay->getattr(w.ino(rel)).ok());
  }
  CHECK(w.ino("node_modules/pkg-8/new.txt") == 0);

  // A copy-up makes pkg-7/ in upper/: getattr must see the copy, not the archive's file.
  REQUIRE(w.write(a, "xy", O_WRONLY | O_TRUNC).ok());
  auto st = w.overlay->getattr(w.ino(a));
  REQUIRE(st.ok());
  CHECK(st->st_size == 2);
  CHECK(w.read(a) == "xy");

  // A new file in pkg-8 (upper pkg-8/ made for it) is found by lookup.
  auto made = w.overlay->create(w.parent(b), "new.txt", 0644, O_WRONLY, fs::Caller{});
  REQUIRE(made.ok());
  w.overlay->release(made->second);
  CHECK(w.ino("node_modules/pkg-8/new.txt") != 0);

  // A renamed archive directory (copied up whole): its files are found and written at the new name.
  REQUIRE(w.overlay->rename(w.ino("node_modules"), "pkg-9", w.ino("node_modules"), "pkg-9b", 0).ok());
  const std::string moved = "node_modules/pkg-9b/lib/util.js";
  REQUIRE(w.ino(moved) != 0);
  REQUIRE(w.write(moved, "moved", O_WRONLY | O_TRUNC).ok());
  CHECK(w.read(moved) == "moved");
  auto moved_st = w.overlay->getattr(w.ino(moved));
  REQUIRE(moved_st.ok());
  CHECK(moved_st->st_size == 5);

  // mkdir of a new directory, then a file in it.
  auto d = w.overlay->mkdir(w.ino("node_modules"), "fresh", 0755, fs::Caller{});
  REQUIRE(d.ok());
  auto f = w.overlay->create(d->ino, "f.txt", 0644, O_WRONLY, fs::Caller{});
  REQUIRE(f.ok());
  w.overlay->release(f->second);
  CHECK(w.ino("node_modules/fresh/f.txt") != 0);
}

TEST_CASE("overlay late hand-off: a file cut off before its late hand-off is not handed; its neighbour is", "[unit]") {
  World w;
  // Two archive files wholly inside one frame: `cut` is written (cut off) after the frame was
  // decoded, `kept` is only read; both become known to the kernel after the decode.
  const format::Index& index = w.lower->index();
  std::map<uint32_t, std::vector<fs::EntryId>> by_frame;
  for (fs::EntryId id = 0; id < index.entry_count(); ++id) {
    const format::Entry e = index.entry(id);
    if (e.type != format::EntryType::kRegular || e.size == 0 || e.link_group != id) continue;
    const auto [a, b] = index.frames_for_range(e.data_offset, e.size);
    if (a == b) by_frame[a].push_back(id);
  }
  std::vector<fs::EntryId> pair;
  for (auto& [frame, ids] : by_frame) {
    if (ids.size() >= 2) {
      pair = {ids[0], ids[1]};
      break;
    }
  }
  REQUIRE(pair.size() == 2);
  const std::string cut = index.path(pair[0]).substr(2), kept = index.path(pair[1]).substr(2);  // below "t/"

  std::mutex mu;
  std::vector<uint64_t> stored;
  int sink_owner = 0;
  w.lower->add_page_cache_sink(&sink_owner, [&](fs::EntryId id, uint64_t, std::span<const char>) {
    return w.overlay->offer_to_page_cache(id, [&](uint64_t ino) {
      std::lock_guard lock(mu);
      stored.push_back(ino);
      return true;
    });
  });
  {
    auto h = w.lower->open(pair[0], O_RDONLY);  // by id: decodes the frame, tells nobody
    REQUIRE(h.ok());
    REQUIRE(w.lower->read_sync(*h, 0, 1).ok());
    w.lower->release(*h);
    w.lower->wait_prefetch_idle();
  }
  {
    std::lock_guard lock(mu);
    stored.clear();
  }
  const uint64_t cut_ino = w.ino(cut), kept_ino = w.ino(kept);
  REQUIRE(w.write(cut, "changed", O_WRONLY | O_TRUNC).ok());  // cut off (and copied up) before the late hand-off
  REQUIRE(w.overlay->page_cache_cut_off(cut_ino));
  w.lower->note_known(pair[0]);
  w.lower->note_known(pair[1]);
  w.lower->wait_late_hand_offs();
  {
    std::lock_guard lock(mu);
    CHECK(std::count(stored.begin(), stored.end(), cut_ino) == 0);
    CHECK(std::count(stored.begin(), stored.end(), kept_ino) == 1);
  }
  CHECK(w.read(cut) == "changed");
  w.lower->remove_page_cache_sink(&sink_owner);
}
