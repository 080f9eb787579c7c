// SPDX-License-Identifier: MIT
// The FUSE-free pieces of the mount seam (issue 19 item 1): the inode numbering both op tables
// use (fs/inode_numbers.h) and Attr -> struct stat (fs/attr_stat.h). Links lc_fs_core only: no
// libfuse, no mount.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "format/archive_test_util.h"
#include "fs/attr_stat.h"
#include "fs/filesystem.h"
#include "fs/inode_numbers.h"
#include "fs/overlay.h"
#include "fs_test_util.h"

using namespace lazycache;
using fs::InodeNumbers;

TEST_CASE("inode numbers: the root is 1, entry N is N + 2, unknown numbers name no entry", "[unit]") {
  const InodeNumbers n(/*root=*/5, /*entry_count=*/10);
  CHECK(n.inode(5) == InodeNumbers::kRootInode);
  CHECK(n.inode(0) == 2);
  CHECK(n.inode(9) == 11);
  CHECK(n.entry(InodeNumbers::kRootInode) == 5);
  for (format::EntryId id = 0; id < 10; ++id) {
    INFO("entry " << id);
    CHECK(n.entry(n.inode(id)) == id);
  }
  // 0 is no inode; numbers past the last entry (the overlay's new files) map past the last id,
  // which every Filesystem call rejects.
  CHECK(n.entry(0) == 10);
  CHECK(n.first_free() == 12);
  CHECK(n.entry(n.first_free()) == 10);
  CHECK(n.entry(UINT64_MAX) == 10);
  // The root keeps its own number too (an alias the kernel is never given).
  CHECK(n.entry(7) == 5);
  static_assert(InodeNumbers(0, 3).inode(0) == 1 && InodeNumbers(0, 3).inode(1) == 3, "constexpr rule");
}

TEST_CASE("Attr -> stat: sizes, blocks, owner and times before 1970", "[unit]") {
  fs::Attr a;
  a.mode = S_IFREG | 0640;
  a.nlink = 3;
  a.uid = 1000;
  a.gid = 100;
  a.size = 513;
  a.mtime_ns = -1;  // one nanosecond before the epoch
  const struct stat st = fs::to_stat(a, 42);
  CHECK(st.st_ino == 42);
  CHECK(st.st_mode == (S_IFREG | 0640));
  CHECK(st.st_nlink == 3);
  CHECK(st.st_uid == 1000);
  CHECK(st.st_gid == 100);
  CHECK(st.st_size == 513);
  CHECK(st.st_blocks == 2);
  CHECK(st.st_blksize == 4096);
  CHECK(st.st_mtim.tv_sec == -1);
  CHECK(st.st_mtim.tv_nsec == 999999999);
  CHECK(st.st_atim.tv_sec == st.st_mtim.tv_sec);
  CHECK(st.st_ctim.tv_nsec == st.st_mtim.tv_nsec);
  CHECK(st.st_dev == 0);
  CHECK(st.st_rdev == 0);

  a.size = 0;
  a.mtime_ns = 1700000000123456789;
  const struct stat later = fs::to_stat(a, 2);
  CHECK(later.st_blocks == 0);
  CHECK(later.st_mtim.tv_sec == 1700000000);
  CHECK(later.st_mtim.tv_nsec == 123456789);
  a.size = 512;
  CHECK(fs::to_stat(a, 2).st_blocks == 1);
}

TEST_CASE("the overlay numbers and describes archive entries as a read-only mount does", "[unit]") {
  testing::TempDir dir;
  REQUIRE(::mkdir((dir / "t").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir / "t/sub").c_str(), 0755) == 0);
  testing::write_file(dir / "t/a", "alpha", 0600);
  testing::write_file(dir / "t/sub/b", std::string(1000, 'b'));
  REQUIRE(::link((dir / "t/a").c_str(), (dir / "t/h").c_str()) == 0);
  testing::pack_paths(dir.path(), {"t"}, dir / "a.tar.zst");
  fs::Filesystem lower(testing::open_archive(dir / "a.tar.zst"), nullptr);
  const auto root = lower.index().lookup_path("t");
  REQUIRE(root);
  const InodeNumbers numbers(*root, lower.index().entry_count());
  auto overlay = fs::Overlay::open(lower, *root, fs::OverlayConfig{dir / "state"});
  REQUIRE(overlay.ok());

  auto sub = (*overlay)->lookup(fs::Overlay::kRootIno, "sub");
  REQUIRE(sub.ok());
  for (const auto& [parent, name] : {std::pair<uint64_t, std::string>{fs::Overlay::kRootIno, "a"},
                                     {fs::Overlay::kRootIno, "h"},
                                     {fs::Overlay::kRootIno, "sub"},
                                     {sub->ino, "b"}}) {
    INFO(name);
    const auto lower_dir = numbers.entry(parent);
    auto id = lower.lookup(lower_dir, name);  // canonical: both names of a hardlink give one id
    REQUIRE(id.ok());
    auto e = (*overlay)->lookup(parent, name);
    REQUIRE(e.ok());
    CHECK(e->ino == numbers.inode(*id));
    auto attr = lower.getattr(*id);
    REQUIRE(attr.ok());
    const struct stat want = fs::to_stat(*attr, numbers.inode(*id));
    CHECK(e->st.st_ino == want.st_ino);
    CHECK(e->st.st_mode == want.st_mode);
    CHECK(e->st.st_nlink == want.st_nlink);
    CHECK(e->st.st_size == want.st_size);
    CHECK(e->st.st_blocks == want.st_blocks);
    CHECK(e->st.st_mtim.tv_sec == want.st_mtim.tv_sec);
    CHECK(e->st.st_mtim.tv_nsec == want.st_mtim.tv_nsec);
  }
  // A file created in the mount gets the first number no archive entry has.
  auto made = (*overlay)->mknod(fs::Overlay::kRootIno, "new", S_IFREG | 0644, fs::Caller{});
  REQUIRE(made.ok());
  CHECK(made->ino == numbers.first_free());
}
