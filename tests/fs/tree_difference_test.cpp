// SPDX-License-Identifier: MIT
// fs::scanned_tree_difference, which the writable reference test and LAZYCACHE_SAVE_CROSSCHECK
// use to compare the tree unmount --save builds with a scan: a change to the directories above a
// root (implicit ancestors, never tar members) is no difference, a change inside the root is.
// The implicit ancestor is often /tmp, which other programs change between two scans.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <string>

#include "format/pack_order.h"
#include "fs/overlay_tree.h"
#include "fs_test_util.h"

using namespace lazycache;
using lazycache::testing::TempDir;

namespace {

format::ScannedTree scan(const std::string& root) {
  auto t = format::scan_for_pack({format::PackRoot{root}}, format::XattrSet::kUser, [](const std::string&) {});
  REQUIRE(t.ok());
  return std::move(*t);
}

void set_mtime(const std::string& path, time_t seconds) {
  const timespec t[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, AT_SYMLINK_NOFOLLOW) == 0);
}

}  // namespace

TEST_CASE("scanned_tree_difference ignores the times of implicit ancestors, not of members", "[unit]") {
  TempDir dir;
  REQUIRE(::mkdir((dir / "above").c_str(), 0755) == 0);
  testing::make_node_like_tree(dir / "above/root", 3);
  const std::string root = dir / "above/root";
  set_mtime(dir / "above", 1500000000);
  const auto before = scan(root);
  CHECK(fs::scanned_tree_difference(before, scan(root)).empty());

  set_mtime(dir / "above", 1600000000);  // what a file created in /tmp does to /tmp
  CHECK(fs::scanned_tree_difference(before, scan(root)).empty());

  set_mtime(root + "/node_modules", 1600000000);
  const std::string diff = fs::scanned_tree_difference(before, scan(root));
  CHECK(diff.find("node_modules: mtime") != std::string::npos);
}
