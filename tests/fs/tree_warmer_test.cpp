// SPDX-License-Identifier: MIT
// TreeWarmer (fs/tree_warmer.h) on a plain directory tree: it lists every name once, the hot
// directories first without listing them twice, stops at its cap, and ends at once when asked;
// the listing runs in a child process (fs/tree_walk.h) that is reaped however the walk ends.
// (That the listing puts the names in a FUSE mount's name cache is tests/mount/mount_test.cpp's.)
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/posix_files.h"
#include "fs/tree_warmer.h"
#include "fs_test_util.h"

using namespace lazycache;
using namespace lazycache::testing;

namespace {

fs::TreeWarmStats walk_to_end(fs::TreeWarmer& w) {
  w.join();
  return w.stats();
}

// d0..d{n-1}, each with files f0..f4 and an empty subdirectory "sub": n * 7 names, 2n + 1 directories.
void make_tree(const std::string& root, int n) {
  ::mkdir(root.c_str(), 0755);
  for (int i = 0; i < n; ++i) {
    const std::string d = root + "/d" + std::to_string(i);
    ::mkdir(d.c_str(), 0755);
    ::mkdir((d + "/sub").c_str(), 0755);
    for (int f = 0; f < 5; ++f) write_file(d + "/f" + std::to_string(f), "x");
  }
}

}  // namespace

TEST_CASE("the tree walk lists every name and directory once, hot directories first included", "[fs][warm]") {
  TempDir dir;
  const std::string root = dir / "t";
  make_tree(root, 30);
  {
    fs::TreeWarmer w(root, 1000000);
    const fs::TreeWarmStats s = walk_to_end(w);
    CHECK_FALSE(s.active);
    CHECK(s.entries == 30 * 7);
    CHECK(s.directories == 2 * 30 + 1);
  }
  {
    // Hot directories (and a repeat, the root and a missing one) are listed once each.
    fs::TreeWarmer w(root, 1000000, {"d7", "d7/sub", "d3", "d7", "", "gone"});
    const fs::TreeWarmStats s = walk_to_end(w);
    CHECK(s.entries == 30 * 7);
    CHECK(s.directories == 2 * 30 + 1);
  }
}

TEST_CASE("the tree walk lists the tree a descriptor is the root of, and does not keep it", "[fs][warm]") {
  // A kernel overlay's lower FUSE mount is detached: only a descriptor reaches it
  // (TreeWalkRequest::root_fd). Here the tree is moved away after the descriptor was taken, so
  // neither the name the walk was given nor the old path leads to it.
  TempDir dir;
  const std::string root = dir / "t";
  make_tree(root, 12);
  UniqueFd fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd.valid());
  const int number = fd.get();
  REQUIRE(::rename(root.c_str(), (dir / "moved").c_str()) == 0);
  fs::TreeWarmer w("/nonexistent/name-only", 1000000, {"d3"}, {}, std::move(fd));
  const fs::TreeWarmStats s = walk_to_end(w);
  CHECK(s.entries == 12 * 7);
  CHECK(s.directories == 2 * 12 + 1);
  // The warmer closed its copy once the walk's process had one.
  CHECK(::fcntl(number, F_GETFD) == -1);
}

TEST_CASE("the tree walk stops at its cap, and at once when asked", "[fs][warm]") {
  TempDir dir;
  const std::string root = dir / "t";
  make_tree(root, 30);
  {
    fs::TreeWarmer w(root, 20);
    const fs::TreeWarmStats s = walk_to_end(w);
    CHECK(s.entries >= 20);
    CHECK(s.entries < 30 * 7);
  }
  {
    fs::TreeWarmer w(root, 0);  // off
    CHECK(walk_to_end(w).entries == 0);
  }
  {
    fs::TreeWarmer w(dir / "missing", 1000);
    CHECK(walk_to_end(w).entries == 0);
  }
  // A stop request ends a walk of a big tree long before its end.
  const std::string big = dir / "big";
  make_tree(big, 2000);
  fs::TreeWarmer w(big, 1000000);
  w.request_stop();
  const fs::TreeWarmStats s = walk_to_end(w);
  CHECK_FALSE(s.active);
  CHECK(s.directories < 2 * 2000 + 1);
}

namespace {

// The pids of this process's children, from /proc/self/task/*/children (every thread's).
std::vector<std::string> children_of_this_process() {
  std::vector<std::string> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "children");
    for (std::string pid; in >> pid;) out.push_back(pid);
  }
  return out;
}

}  // namespace

TEST_CASE("the tree walk runs in a process of its own, reports each directory and leaves no child behind", "[fs][warm]") {
  TempDir dir;
  const std::string root = dir / "t";
  make_tree(root, 30);
  REQUIRE(children_of_this_process().empty());
  std::atomic<int> listed{0}, ended{0}, finished{0};
  std::atomic<bool> child_seen{false};
  fs::TreeWarmHooks hooks{[&] {
                            // Runs on the thread following the walk, after the walk's process
                            // listed a directory: that process is still there.
                            if (!children_of_this_process().empty()) child_seen = true;
                            ++listed;
                          },
                          [&](bool done) {
                            ++ended;
                            if (done) ++finished;
                          }};
  {
    fs::TreeWarmer w(root, 1000000, {}, hooks);
    w.join();
    CHECK(w.stats().directories == 2 * 30 + 1);
  }
  CHECK(listed == 2 * 30 + 1);
  CHECK(child_seen);
  CHECK(ended == 1);
  CHECK(finished == 1);
  CHECK(children_of_this_process().empty());  // reaped
  // Stopped while it walks: its process is killed and reaped, and the walk did not finish.
  const std::string big = dir / "big";
  make_tree(big, 3000);
  {
    fs::TreeWarmer w(big, 100000000, {}, hooks);
    for (int i = 0; i < 2000 && w.stats().directories < 10; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    w.request_stop();
    w.join();
    CHECK(w.stats().directories < 2 * 3000 + 1);
  }
  CHECK(ended == 2);
  CHECK(finished == 1);
  CHECK(children_of_this_process().empty());
}
