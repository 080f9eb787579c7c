// SPDX-License-Identifier: MIT
// Writable mounts for real (FUSE), issue 15: archive files reach the kernel's page cache as on a
// read-only mount, and nobody sees stale bytes after a write, a truncate or a re-creation of such
// a file; negative lookups, now cached by the kernel, are replaced by create, rename and mkdir;
// the session counts the kernel's requests. Skipped (with a message) without /dev/fuse.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "format/archive_test_util.h"
#include "fs/fs_test_util.h"
#include "fs/fuse_adapter.h"
#include "fs/overlay.h"
#include "mounted_overlay.h"

using namespace lazycache;
using lazycache::testing::fuse_usable;
using lazycache::testing::MountedOverlay;
using lazycache::testing::run;

namespace {

bool missing(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

void write_at(const std::string& path, const std::string& data, off_t off, int flags = O_WRONLY) {
  const int fd = ::open(path.c_str(), flags, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, data.data(), data.size(), off) == static_cast<ssize_t>(data.size()));
  REQUIRE(::close(fd) == 0);
}

uint64_t count(const fs::FuseMount& m, fs::FuseRequest r) { return m.requests()[static_cast<size_t>(r)]; }

}  // namespace

TEST_CASE("writable mount: archive files go to the page cache, and writes, truncates and re-creations after it read back exactly",
          "[fuse]") {
  if (!fuse_usable()) {
    WARN("skipped: /dev/fuse cannot be opened");
    return;
  }
  MountedOverlay m(30);
  run("find '" + m.mnt + "' > /dev/null");  // readdirplus: the kernel knows every inode
  const std::string sum = "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum";
  CHECK(run("cd '" + m.mnt + "' && " + sum) == run("cd '" + m.plain + "' && " + sum));
  REQUIRE(m.lower->stats().files_to_page_cache > 0);

  // Every file was read, so each small one went whole to the kernel: change some of them now, on
  // the mount and on the plain copy alike, and read everything back.
  for (int p = 0; p < 30; p += 3) {
    const std::string pkg = "/node_modules/pkg-" + std::to_string(p);
    const std::string next = "/node_modules/pkg-" + std::to_string(p + 1);
    for (const std::string& base : {m.mnt, m.plain}) {
      write_at(base + pkg + "/index.js", "XY", 1);                            // in place
      write_at(base + pkg + "/package.json", "{}\n", 0, O_WRONLY | O_TRUNC);  // truncated by open
      REQUIRE(::truncate((base + pkg + "/lib/util.js").c_str(), 7) == 0);     // by setattr
      REQUIRE(::unlink((base + next + "/index.js").c_str()) == 0);            // made again
      write_at(base + next + "/index.js", "again", 0, O_WRONLY | O_CREAT | O_EXCL);
    }
  }
  CHECK(run("cd '" + m.mnt + "' && " + sum) == run("cd '" + m.plain + "' && " + sum));
  // Through new descriptors too (archive files keep their pages across opens: keep_cache).
  for (int p = 0; p < 30; p += 3) {
    const std::string pkg = "/node_modules/pkg-" + std::to_string(p);
    CHECK(testing::read_file(m.mnt + pkg + "/index.js") == testing::read_file(m.plain + pkg + "/index.js"));
    CHECK(testing::read_file(m.mnt + pkg + "/package.json") == "{}\n");
    CHECK(testing::read_file(m.mnt + pkg + "/lib/util.js") == testing::read_file(m.plain + pkg + "/lib/util.js"));
    CHECK(testing::read_file(m.mnt + "/node_modules/pkg-" + std::to_string(p + 1) + "/index.js") == "again");
  }
  CHECK(m.lower->stats().read_errors == 0);
}

TEST_CASE("writable mount: cached negative lookups give way to create, rename, mkdir and symlink; requests are counted", "[fuse]") {
  if (!fuse_usable()) {
    WARN("skipped: /dev/fuse cannot be opened");
    return;
  }
  MountedOverlay m;
  const std::string dir = m.mnt + "/node_modules/pkg-2";
  const uint64_t lookups_before = count(*m.mount, fs::FuseRequest::kLookup);
  for (int i = 0; i < 3; ++i) CHECK(missing(dir + "/made.js"));
  // The kernel kept the negative entry: one LOOKUP for three stats (and one for the directory).
  CHECK(count(*m.mount, fs::FuseRequest::kLookup) - lookups_before <= 3);

  write_at(dir + "/made.js", "made", 0, O_WRONLY | O_CREAT | O_EXCL);
  CHECK(testing::read_file(dir + "/made.js") == "made");

  CHECK(missing(dir + "/renamed.js"));
  REQUIRE(::rename((dir + "/made.js").c_str(), (dir + "/renamed.js").c_str()) == 0);
  CHECK(missing(dir + "/made.js"));
  CHECK(testing::read_file(dir + "/renamed.js") == "made");

  CHECK(missing(dir + "/sub"));
  REQUIRE(::mkdir((dir + "/sub").c_str(), 0755) == 0);
  CHECK(missing(dir + "/sub/x"));
  write_at(dir + "/sub/x", "x", 0, O_WRONLY | O_CREAT | O_EXCL);
  CHECK(testing::read_file(dir + "/sub/x") == "x");

  CHECK(missing(dir + "/link.js"));
  REQUIRE(::symlink("renamed.js", (dir + "/link.js").c_str()) == 0);
  CHECK(testing::read_file(dir + "/link.js") == "made");

  // An archive file removed, looked up missing, made again.
  REQUIRE(::unlink((dir + "/index.js").c_str()) == 0);
  CHECK(missing(dir + "/index.js"));
  write_at(dir + "/index.js", "back", 0, O_WRONLY | O_CREAT | O_EXCL);
  CHECK(testing::read_file(dir + "/index.js") == "back");

  CHECK(count(*m.mount, fs::FuseRequest::kCreate) >= 3);
  CHECK(count(*m.mount, fs::FuseRequest::kNameChange) >= 4);  // rename, mkdir, symlink, unlink
  CHECK(count(*m.mount, fs::FuseRequest::kOpen) >= 1);
}
