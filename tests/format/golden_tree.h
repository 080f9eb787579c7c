// SPDX-License-Identifier: MIT
// File: tests/format/golden_tree.h -- the fixed tree behind tests/data/golden/v1.tar.zst.
// Changing it means regenerating the golden file (tests/data/golden/REGENERATE.md).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tree_util.h"

namespace lazycache::testing {

// Builds DIR/golden with fixed content, modes and mtimes.
inline void make_golden_tree(const std::string& dir) {
  std::string g = dir + "/golden";
  ::mkdir(g.c_str(), 0755);
  ::mkdir((g + "/sub").c_str(), 0750);
  ::mkdir((g + "/empty").c_str(), 0755);
  write_file(g + "/hello.txt", "hello, golden\n");
  write_file(g + "/sub/data.bin", pattern(20000, 7));
  write_file(g + "/zero", "");
  ::link((g + "/hello.txt").c_str(), (g + "/sub/hello-link").c_str());
  ::symlink("../hello.txt", (g + "/sub/sym").c_str());
  for (const char* p : {"/hello.txt", "/sub/data.bin", "/zero", "/sub/sym", "/empty", "/sub", ""}) set_mtime(g + p, 1700000000, 123456789);
}

}  // namespace lazycache::testing
