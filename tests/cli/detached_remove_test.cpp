// SPDX-License-Identifier: MIT
// tools/detached_remove.h: the state of a saved mount is gone from its name at once and removed
// by a detached process (waited for here by polling, with a generous bound: no timing claim).
#include "tools/detached_remove.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "tests/format/tree_util.h"

using namespace lazycache;

namespace {

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d))
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

}  // namespace

TEST_CASE("remove_tree_detached: gone from its name at once, removed by a detached process", "[unit]") {
  lazycache::testing::TempDir t;
  const std::string state = t / "mount-42";
  REQUIRE(::mkdir(state.c_str(), 0755) == 0);
  REQUIRE(::mkdir((state + "/upper").c_str(), 0755) == 0);
  REQUIRE(::mkdir((state + "/upper/a").c_str(), 0555) == 0);  // read-only directory: rm -rf still removes what it holds
  lazycache::testing::write_file(state + "/upper/f", "x");
  REQUIRE(::mkdir((state + "/work").c_str(), 0755) == 0);
  REQUIRE(::symlink("/etc/passwd", (state + "/upper/link").c_str()) == 0);  // not followed

  REQUIRE(cli::remove_tree_detached(state));
  struct stat st;
  CHECK(::lstat(state.c_str(), &st) != 0);
  // The hidden sibling goes when rm is done (bounded wait, 60 s).
  for (int i = 0; i < 600 && !names_in(t.path()).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(names_in(t.path()).empty());
  CHECK(::stat("/etc/passwd", &st) == 0);

  // A directory already gone is not an error.
  CHECK(cli::remove_tree_detached(t / "never-there"));
}
