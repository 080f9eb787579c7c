// SPDX-License-Identifier: MIT
// A writable FUSE mount of a packed node-like tree (the Overlay over a Filesystem) next to a
// plain copy of the same tree, for tests that do the same to both and compare. Catch2 tests only.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "format/archive_test_util.h"
#include "fs/fs_test_util.h"
#include "fs/overlay.h"
#include "fs/overlay_fuse.h"

namespace lazycache::testing {

inline bool fuse_usable() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  INFO(cmd << "\n" << out);
  REQUIRE(rc == 0);
  return out;
}

// `packages` sizes the tree (make_node_like_tree); frames of 64 KiB.
struct MountedOverlay {
  TempDir dir;
  std::string src = dir / "src", plain = dir / "plain", mnt = dir / "mnt";
  std::unique_ptr<fs::Filesystem> lower;
  std::unique_ptr<fs::Overlay> overlay;
  std::unique_ptr<fs::FuseMount> mount;  // declared last: unmounted first

  explicit MountedOverlay(int packages = 14) {
    testing::make_node_like_tree(src, packages);
    format::PackConfig cfg;
    cfg.frame_size_bytes = 64 << 10;
    testing::pack_paths(dir.path(), {"src"}, dir / "a.tar.zst", cfg);
    run("cp -a '" + src + "' '" + plain + "'");
    REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
    lower = std::make_unique<fs::Filesystem>(testing::open_archive(dir / "a.tar.zst"), nullptr);
    auto root = lower->index().lookup_path("src");
    REQUIRE(root);
    auto o = fs::Overlay::open(*lower, *root, fs::OverlayConfig{dir / "state"});
    REQUIRE(o.ok());
    overlay = std::move(o).value();
    fs::FuseMountConfig mc;
    mc.mountpoint = mnt;
    mc.root = *root;
    auto m = fs::mount_overlay(*overlay, mc);
    INFO((m.ok() ? std::string() : m.error().to_string()));
    REQUIRE(m.ok());
    mount = std::move(m).value();
    mount->start();
  }
};

}  // namespace lazycache::testing
