// SPDX-License-Identifier: MIT
// File: tests/mount/mount_test_util.h -- running the lazycache CLI from FUSE tests: a per-test
// environment (run dir, chunk cache), command runner, and MountGuard, which always unmounts.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fs_test_util.h"

namespace lazycache::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr, interleaved
};

inline CommandResult run(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string cli() { return LC_CLI_PATH; }

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

// FUSE tests need /dev/fuse and the right to mount; without them they are skipped, loudly.
inline bool fuse_available() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    WARN("SKIPPED: /dev/fuse cannot be opened; FUSE mount tests need it");
    return false;
  }
  ::close(fd);
  return true;
}

// Isolates a test: its own run dir (mount state) and chunk cache, through the environment the
// CLI reads. Tests in one binary run one after another, so setenv is safe here.
struct MountEnv {
  TempDir dir;
  std::string run_dir = dir / "run";
  std::string cache_dir = dir / "cache";
  MountEnv() {
    ::setenv("LAZYCACHE_RUN_DIR", run_dir.c_str(), 1);
    ::setenv("LAZYCACHE_CACHE_DIR", cache_dir.c_str(), 1);
  }
};

// Unmounts in its destructor whatever happened: lazily through the CLI, then by hand.
class MountGuard {
 public:
  explicit MountGuard(std::string path) : path_(std::move(path)) {}
  ~MountGuard() {
    run(cli() + " unmount --lazy " + quote(path_));
    ::umount2(path_.c_str(), MNT_DETACH);
  }
  MountGuard(const MountGuard&) = delete;
  MountGuard& operator=(const MountGuard&) = delete;

 private:
  std::string path_;
};

// Everything a mount must reproduce, one line per entry in a fixed order: type, path, mode,
// link count, size of files, symlink target, mtime to the nanosecond, then every file's MD5.
inline std::string describe_tree(const std::string& root) {
  CommandResult r = run("cd " + quote(root) +
                        " && find . -type d -printf 'd %p %m %n %T@\\n' -o -type l -printf 'l %p -> %l %T@\\n'"
                        " -o -type f -printf 'f %p %m %n %s %T@\\n' | LC_ALL=C sort"
                        " && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r md5sum");
  if (r.exit_code != 0) {  // say which entries failed and why (md5sum: FILE: Input/output error)
    std::string errors;
    for (size_t pos = 0; pos < r.out.size();) {
      size_t end = r.out.find('\n', pos);
      if (end == std::string::npos) end = r.out.size();
      std::string line = r.out.substr(pos, end - pos);
      if (line.rfind("md5sum:", 0) == 0 || line.rfind("find:", 0) == 0) errors += line + "\n";
      pos = end + 1;
    }
    FAIL("describing " << root << " failed (exit " << r.exit_code << "):\n" << errors);
  }
  return r.out;
}

// describe_tree() with the root directory's link count left out. A writable mount as root is a
// kernel overlay (tools/kernel_overlay.h), and overlayfs reports one link for a merged directory
// (the mount's root is one: upper and archive): "unknown", so find does not skip by link count.
inline std::string describe_tree_but_root_links(const std::string& root) {
  std::string d = describe_tree(root);
  const std::string head = "d . ";
  if (d.rfind(head, 0) == 0) {
    const size_t mode_end = d.find(' ', head.size());
    const size_t links_end = mode_end == std::string::npos ? mode_end : d.find(' ', mode_end + 1);
    if (links_end != std::string::npos) d.replace(mode_end + 1, links_end - mode_end - 1, "-");
  }
  return d;
}

// `cmd` run in both trees (cwd = the tree) must print the same, and something.
inline void same_output(const std::string& a, const std::string& b, const std::string& cmd) {
  CommandResult ra = run("cd " + quote(a) + " && " + cmd), rb = run("cd " + quote(b) + " && " + cmd);
  INFO(cmd);
  REQUIRE(ra.exit_code == 0);
  REQUIRE(rb.exit_code == 0);
  CHECK(ra.out == rb.out);
  CHECK(!ra.out.empty());
}

// Is `path` a lazycache mount point right now (per /proc/self/mountinfo): its FUSE file system,
// or the kernel overlay a writable mount stacks on it as root (tools/kernel_overlay.h)?
inline bool is_lazycache_mount_path(const std::string& path) {
  CommandResult r = run("awk '$5 == \"" + path +
                        "\" { for (i = 7; i <= NF; i++) if ($i == \"-\") print $(i+1), $(i+2) }' /proc/self/mountinfo");
  return r.out.find("fuse.lazycache") != std::string::npos || r.out.find("overlay lazycache") != std::string::npos;
}

// A number from `lazycache status --json PATH` ("key":N); -1 when absent.
inline long long status_number(const std::string& path, const std::string& key) {
  CommandResult r = run(cli() + " status --json " + quote(path));
  auto pos = r.out.find("\"" + key + "\":");
  if (pos == std::string::npos) return -1;
  return std::atoll(r.out.c_str() + pos + key.size() + 3);
}

}  // namespace lazycache::testing
