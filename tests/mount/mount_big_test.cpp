// SPDX-License-Identifier: MIT
// 30,000 files through a real mount: every file stat'ed and read, listings compared, the kernel
// opening files itself, and the daemon holds no descriptor per inode.
#include <catch2/catch.hpp>

#include "fs/local_files.h"
#include "mount_test_util.h"

using namespace lazycache::testing;

TEST_CASE("30,000 files: find, stat and cat of everything, without a descriptor per inode", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  const std::string t = dir / "t";
  ::mkdir(t.c_str(), 0755);
  for (int d = 0; d < 30; ++d) {
    const std::string sub = t + "/dir-" + std::to_string(d);
    ::mkdir(sub.c_str(), 0755);
    for (int f = 0; f < 1000; ++f) {
      write_file(sub + "/f" + std::to_string(f) + ".js", "module.exports = " + std::to_string(d * 1000 + f) + ";\n");
    }
  }
  pack_tree(dir.path(), {"t"}, dir / "a.tar.zst", 4 << 20);
  const std::string mnt = dir / "mnt";
  ::mkdir(mnt.c_str(), 0755);
  MountGuard guard(mnt);
  CommandResult m = run(cli() + " mount --archive " + quote(dir / "a.tar.zst") + " " + quote(mnt));
  INFO(m.out);
  REQUIRE(m.exit_code == 0);
  CHECK(status_number(mnt, "mount_range_reads") <= 2);

  CommandResult count = run("find " + quote(mnt) + " -type f | wc -l");
  CHECK(std::stoi(count.out) == 30000);
  // Contents: one stream over every file, in a fixed order, both sides.
  auto digest = [](const std::string& root) {
    return run("cd " + quote(root) + " && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum").out;
  };
  CHECK(digest(t) == digest(mnt));
  // Sizes of files only: a directory's size on disk is its block count, on the mount 0.
  const std::string listing = " && find . -type d -printf '%p %m %T@\\n' -o -printf '%p %s %m %T@ %n\\n' | LC_ALL=C sort";
  CHECK(run("cd " + quote(t) + listing).out == run("cd " + quote(mnt) + listing).out);
  // Zero-message opens (fs/mount_config.h kernel_opens): the kernel asked once, then opened the
  // other 29,999 files itself; the daemon keeps at most 1024 read handles (fs/inode_handles.h).
  CHECK(status_number(mnt, "requests_open") == 1);
  CHECK(status_number(mnt, "requests_opendir") <= 1);
  CHECK(status_number(mnt, "open_handles") <= 1024);
  const long long pid = status_number(mnt, "pid");
  REQUIRE(pid > 0);
  CHECK(lazycache::fs::list_dir("/proc/" + std::to_string(pid) + "/fd").size() < 64);
  CHECK(run(cli() + " unmount " + quote(mnt)).exit_code == 0);
}
