// SPDX-License-Identifier: MIT
// Writable mounts for real (FUSE): the POSIX script (posix_script.sh) run on the mount and on a
// plain copy of the archived tree must print the same; real tools (git clone, a "build" writing
// many objects) work in the mount; and the merged view, saved with write_archive as
// `unmount --save` does, restores with stock `zstd -d | tar -x` to exactly what the tools left.
// Skipped (with a message) when /dev/fuse cannot be opened.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

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

// A listing that must match between two trees: type, mode, size and links of files, content.
std::string tree_listing(const std::string& dir) {
  return run("cd '" + dir +
             "' && find . -mindepth 1 \\( -type d -printf '%y %m %p\\n' \\) -o \\( -printf '%y %m %s %n %p %l\\n' \\) | sort"
             " && find . -type f -print0 | sort -z | xargs -0 -r md5sum | grep -v -e '/.git/index$' -e '/.git/logs/'");  // stat data, clock
}

void require_same(const std::string& a, const std::string& b, const std::string& what) {
  if (a == b) return;
  // Show the first differing line rather than two walls of text.
  std::istringstream ia(a), ib(b);
  std::string la, lb;
  int line = 0;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(ia, la)), gb = static_cast<bool>(std::getline(ib, lb));
    ++line;
    if (!ga && !gb) break;
    if (!ga || !gb || la != lb) {
      FAIL(what << ": first difference at line " << line << "\n  mount: " << (ga ? la : "<end>") << "\n  plain: " << (gb ? lb : "<end>"));
    }
  }
}

}  // namespace

TEST_CASE("writable mount: the POSIX script prints the same on the mount as on a plain directory", "[fuse]") {
  if (!fuse_usable()) {
    WARN("skipped: /dev/fuse cannot be opened");
    return;
  }
  MountedOverlay m;
  const std::string script = std::string(LC_WRITABLE_TEST_DIR) + "/posix_script.sh";
  const std::string on_mount = run("bash '" + script + "' '" + m.mnt + "'");
  const std::string on_plain = run("bash '" + script + "' '" + m.plain + "'");
  require_same(on_mount, on_plain, "posix_script.sh output");
  CHECK(m.overlay->changed());
  // Untouched archive files were not copied up: only what the script changed.
  CHECK(m.overlay->copy_ups() < 30);
}

TEST_CASE("writable mount: git clone and a build writing many objects, saved and restored with zstd | tar", "[fuse]") {
  if (!fuse_usable()) {
    WARN("skipped: /dev/fuse cannot be opened");
    return;
  }
  MountedOverlay m;
  // A small local repository to clone.
  const std::string repo = m.dir / "repo";
  run("git init -q '" + repo + "' && cd '" + repo +
      "' && mkdir -p src docs && for i in $(seq 1 40); do "
      "echo \"int f$i(void) { return $i; }\" > src/f$i.c; done && echo '# readme' > docs/README.md && "
      "git add -A && git -c user.email=t@t -c user.name=t commit -q -m one && "
      "echo 'int g(void) { return 0; }' > src/g.c && git add -A && git -c user.email=t@t -c user.name=t commit -q -m two");
  for (const std::string& where : {m.mnt, m.plain}) {
    run("git clone -q 'file://" + repo + "' '" + where + "/cloned' && git -C '" + where +
        "/cloned' fsck --strict 2>&1 && "
        "test -z \"$(git -C '" +
        where + "/cloned' status --porcelain)\"");
    // A "build": many object files written, renamed into place, some deleted (as make/ccache do).
    run("cd '" + where +
        "' && mkdir -p build && for i in $(seq 1 200); do printf 'obj %s %0500d' $i $i > build/o$i.tmp && "
        "mv build/o$i.tmp build/o$i.o; done && rm build/o1?.o && rm -r node_modules/pkg-13");
  }
  require_same(tree_listing(m.mnt + "/cloned"), tree_listing(m.plain + "/cloned"), "git clone");
  require_same(tree_listing(m.mnt), tree_listing(m.plain), "whole tree");

  // Save the merged view as `unmount --save` does (through the mount), then restore it with
  // stock tools and compare with the plain directory.
  auto sink = LocalFileSink::create(m.dir / "saved.tar.zst");
  REQUIRE(sink.ok());
  format::PackConfig cfg;
  cfg.warn = [](const std::string&) {};
  cfg.hot_paths = {"mnt/node_modules/pkg-2/index.js"};
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old) != nullptr);
  REQUIRE(::chdir(m.dir.path().c_str()) == 0);
  auto stats = format::write_archive({format::PackRoot{"mnt"}}, **sink, cfg);
  REQUIRE(::chdir(old) == 0);
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  run("mkdir '" + m.dir / "restored" + "' && zstd -q -d < '" + m.dir / "saved.tar.zst" + "' | tar -x -C '" + m.dir / "restored" + "'");
  require_same(tree_listing(m.dir / "restored/mnt"), tree_listing(m.plain), "restored with zstd | tar");
  auto reader = testing::open_archive(m.dir / "saved.tar.zst");
  REQUIRE(reader->index().hot_list().size() == 1);
  CHECK(reader->index().path(reader->index().hot_list()[0]) == "mnt/node_modules/pkg-2/index.js");
}
