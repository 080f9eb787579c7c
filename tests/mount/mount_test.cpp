// SPDX-License-Identifier: MIT
// Real FUSE mounts through the CLI: archives packed in-process, then `mount --archive`, `status`,
// `unmount`.
// Every test mounts under its own temp dir and unmounts in teardown (MountGuard), even on failure.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "fs/local_files.h"
#include "mount_test_util.h"

using namespace lazycache::testing;

namespace {

// Packs dir/t into dir/a.tar.zst with small frames so that laziness shows on a small tree.
std::string pack(const TempDir& dir, uint64_t frame_size = 64 << 10) {
  pack_tree(dir.path(), {"t"}, dir / "a.tar.zst", frame_size);
  return dir / "a.tar.zst";
}

std::string mount_archive(const std::string& archive, const std::string& mnt, const std::string& extra = "") {
  ::mkdir(mnt.c_str(), 0755);
  CommandResult r = run(cli() + " mount " + extra + " --archive " + quote(archive) + " " + quote(mnt));
  INFO(r.out);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

size_t daemon_fd_count(const std::string& mnt) {
  long long pid = status_number(mnt, "pid");
  REQUIRE(pid > 0);
  return lazycache::fs::list_dir("/proc/" + std::to_string(pid) + "/fd").size();
}

void add_edge_cases(const std::string& t) {
  write_file(t + "/empty", "");
  write_file(t + "/name with spaces & ünïcødé", "spaces\n", 0600);
  write_file(t + "/large.bin", pattern(5 << 20, 77), 0755);
  std::string deep = t;
  for (int i = 0; i < 12; ++i) {
    deep += "/d" + std::to_string(i);
    ::mkdir(deep.c_str(), 0750);
  }
  write_file(deep + "/leaf", "deep\n");
  REQUIRE(::symlink("node_modules/pkg-1/index.js", (t + "/link-to-file").c_str()) == 0);
  REQUIRE(::symlink("/nonexistent/dangling", (t + "/dangling").c_str()) == 0);
  set_mtime(t + "/empty", 1234567890, 987654321);
}

}  // namespace

TEST_CASE("mounted tree equals the source: content, modes, mtimes, links, listings; find, ls -lR, du, cat", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 80);
  add_edge_cases(dir / "t");
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  MountGuard guard(mnt);
  mount_archive(archive, mnt);

  CHECK(describe_tree(dir / "t") == describe_tree(mnt));
  same_output(dir / "t", mnt, "find . | LC_ALL=C sort");
  same_output(dir / "t", mnt, "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum");
  // ls -lR: everything but directory lines (the disk's sizes are block sizes, the mount's 0),
  // with blanks squeezed (those sizes also set the column widths).
  same_output(dir / "t", mnt, "ls -lR --time-style=full-iso . | grep -v '^total' | awk '$1 !~ /^d/' | tr -s ' '");
  same_output(dir / "t", mnt, "find . -type l -printf '%p -> %l\\n' | LC_ALL=C sort");
  same_output(dir / "t", mnt, "find . -printf '%p %n %m %T@\\n' | LC_ALL=C sort");
  // du: apparent sizes of files and links (hardlinks once) are what the disk has.
  same_output(dir / "t", mnt, "du -ab . | awk '{print $2}' | LC_ALL=C sort | wc -l");
  same_output(dir / "t", mnt, "find . -type f -printf '%s %p\\n' | LC_ALL=C sort");
  CHECK(run("du -sh " + quote(mnt)).exit_code == 0);

  CHECK(status_number(mnt, "mount_range_reads") >= 1);
  CHECK(status_number(mnt, "mount_range_reads") <= 2);
  CHECK(status_number(mnt, "read_errors") == 0);
  CHECK(daemon_fd_count(mnt) < 64);  // nothing held per inode or per file read
  // Read-only: writes are refused.
  CHECK(::open((mnt + "/newfile").c_str(), O_CREAT | O_WRONLY, 0644) < 0);
  CHECK(::open((mnt + "/empty").c_str(), O_WRONLY) < 0);
}

TEST_CASE("reading a few files fetches a small part; a second mount serves them from the chunk cache", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 200);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  const std::vector<std::string> few = {"/node_modules/pkg-7/index.js", "/node_modules/pkg-120/package.json",
                                        "/node_modules/pkg-199/lib/util.js"};
  {
    MountGuard guard(mnt);
    mount_archive(archive, mnt, "--prefetch none");
    for (const auto& f : few) CHECK(read_file(mnt + f) == read_file(dir / "t" + f));
    const long long fetched = status_number(mnt, "store_bytes");
    const long long total = status_number(mnt, "archive_bytes");
    CHECK(fetched > 0);
    CHECK(fetched * 10 < total);
    CHECK(status_number(mnt, "frames_from_store") <= 6);
    CommandResult r = run(cli() + " unmount " + quote(mnt));
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("fetched") != std::string::npos);
    CHECK(r.out.find("3 files opened") != std::string::npos);
    CHECK_FALSE(is_lazycache_mount_path(mnt));
  }
  MountGuard guard(mnt);
  mount_archive(archive, mnt, "--prefetch none");
  for (const auto& f : few) CHECK(read_file(mnt + f) == read_file(dir / "t" + f));
  CHECK(status_number(mnt, "store_range_reads") == 0);
  CHECK(status_number(mnt, "store_bytes") == 0);
  CHECK(status_number(mnt, "frames_from_chunk_cache") >= 1);
  CommandResult r = run(cli() + " unmount --json " + quote(mnt));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"store_range_reads\":0") != std::string::npos);
}

TEST_CASE("mount cost is at most two range reads whatever the archive size", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  for (int packages : {5, 800}) {
    TempDir dir;
    make_node_like_tree(dir / "t", packages);
    const std::string archive = pack(dir, 4096);  // many frames: a large seek table
    const std::string mnt = dir / "mnt";
    MountGuard guard(mnt);
    mount_archive(archive, mnt, "--fill none");  // the background fill reads data frames by design
    INFO(packages << " packages");
    CHECK(status_number(mnt, "mount_range_reads") >= 1);
    CHECK(status_number(mnt, "mount_range_reads") <= 2);
    CHECK(status_number(mnt, "store_range_reads") == 0);  // metadata needs no data frames
    CHECK(run("find " + quote(mnt) + " -type f | wc -l").exit_code == 0);
    CHECK(status_number(mnt, "store_range_reads") == 0);
  }
}

TEST_CASE("after find, the files of each decoded frame reach the page cache with exact bytes", "[fuse]") {
  // The page-cache hand-off (issue 15): find's readdirplus tells the kernel every inode, so each
  // frame a read decodes puts its files into the page cache (notify_store); cat then reads them
  // from there, and a frame whose every file went is dropped from the daemon's memory.
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 80);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  MountGuard guard(mnt);
  mount_archive(archive, mnt);
  REQUIRE(run("find " + quote(mnt) + " > /dev/null").exit_code == 0);
  same_output(dir / "t", mnt, "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum");
  CHECK(status_number(mnt, "files_to_page_cache") > 0);
  CHECK(status_number(mnt, "frames_to_page_cache") > 0);
  CHECK(status_number(mnt, "read_errors") == 0);
  // The kernel's requests are counted by kind (find lists, cat opens).
  CHECK(status_number(mnt, "requests_readdir") > 0);
  CHECK(status_number(mnt, "requests_open") > 0);
  // Read again: the page cache and the daemon agree byte for byte.
  same_output(dir / "t", mnt, "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum");
}

TEST_CASE("a read-only mount lets the kernel open files itself; --open-requests always asks for each", "[fuse]") {
  // Zero-message opens (fs/mount_config.h kernel_opens): the first OPEN and OPENDIR are answered
  // with ENOSYS, the kernel opens everything else itself, and READs that still come (a file's
  // pages dropped from the page cache) are served through a handle kept by file.
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 60);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  const std::string read_all = "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum";
  // Drops every file's pages (POSIX_FADV_DONTNEED), so the next read of each is a READ.
  const std::string drop_pages =
      "find . -type f -exec python3 -c 'import os, sys\nfor p in sys.argv[1:]:\n    fd = os.open(p, os.O_RDONLY)\n"
      "    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n    os.close(fd)' {} +";
  const long long files = std::stoll(run("cd " + quote(dir / "t") + " && find . -type f | wc -l").out);
  {
    MountGuard guard(mnt);
    mount_archive(archive, mnt);
    same_output(dir / "t", mnt, read_all);
    CHECK(status_number(mnt, "requests_open") == 1);
    // One per opener that asked before the kernel had the first ENOSYS: the mount's tree walk and
    // this find start together (seen 2 in a clean-clone CI run on a loaded machine).
    CHECK(status_number(mnt, "requests_opendir") <= 2);
    REQUIRE(run("cd " + quote(mnt) + " && " + drop_pages).exit_code == 0);
    const long long reads_before = status_number(mnt, "requests_read");
    same_output(dir / "t", mnt, read_all);  // every file again, now through READs without a handle
    CHECK(status_number(mnt, "requests_read") > reads_before);
    CHECK(status_number(mnt, "read_errors") == 0);
    CHECK(status_number(mnt, "requests_open") == 1);
    // A write open is still refused, by the kernel (a read-only mount) or by the daemon.
    CHECK(::open((mnt + "/node_modules/pkg-3/index.js").c_str(), O_WRONLY) < 0);
    CHECK(errno == EROFS);
    CHECK(run(cli() + " unmount " + quote(mnt)).exit_code == 0);
  }
  MountGuard guard(mnt);
  mount_archive(archive, mnt, "--open-requests always");
  same_output(dir / "t", mnt, read_all);
  same_output(dir / "t", mnt, read_all);
  CHECK(status_number(mnt, "requests_open") == 2 * files);
  CHECK(status_number(mnt, "files_opened") == 2 * files);
  CHECK(status_number(mnt, "open_handles") == 0);
  CommandResult bad = run(cli() + " mount --archive " + quote(archive) + " --open-requests never " + quote(dir / "t"));
  CHECK(bad.exit_code == 2);
  CHECK(bad.out.find("--open-requests: expected auto or always") != std::string::npos);
}

TEST_CASE("16 threads reading random files through the mount get the right bytes", "[fuse][concurrency]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 100);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  MountGuard guard(mnt);
  mount_archive(archive, mnt, "--memory-budget 2M");
  std::vector<std::string> files;
  CommandResult list = run("cd " + quote(dir / "t") + " && find . -type f");
  std::istringstream in(list.out);
  for (std::string line; std::getline(in, line);) files.push_back(line.substr(1));
  REQUIRE(files.size() > 100);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 40; ++i) {
        const std::string& f = files[rng() % files.size()];
        if (read_file(mnt + f) != read_file(dir / "t" + f)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(bad == 0);
  CHECK(status_number(mnt, "read_errors") == 0);
}

TEST_CASE("unmount while a file is open fails cleanly; --lazy detaches and the daemon exits after close", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 10);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  MountGuard guard(mnt);
  mount_archive(archive, mnt);
  const long long pid = status_number(mnt, "pid");
  int fd = ::open((mnt + "/node_modules/pkg-1/index.js").c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  CommandResult busy = run(cli() + " unmount " + quote(mnt));
  CHECK(busy.exit_code == 1);
  CHECK(busy.out.find("busy") != std::string::npos);
  CHECK(is_lazycache_mount_path(mnt));  // still mounted and serving
  char buf[16];
  CHECK(::pread(fd, buf, sizeof buf, 0) == sizeof buf);

  CommandResult lazy = run(cli() + " unmount --lazy " + quote(mnt));
  INFO(lazy.out);
  CHECK(lazy.exit_code == 0);
  CHECK_FALSE(is_lazycache_mount_path(mnt));
  CHECK(::pread(fd, buf, sizeof buf, 0) == sizeof buf);  // the open file still reads
  CHECK(::kill(static_cast<pid_t>(pid), 0) == 0);
  ::close(fd);
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {
    exited = ::kill(static_cast<pid_t>(pid), 0) != 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  CHECK(exited);
}

TEST_CASE("a mount whose daemon was killed is detected and cleaned by the next status, mount or unmount", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 10);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  MountGuard guard(mnt);
  // Each of status, mount and unmount detects the stale mount by itself and cleans it.
  for (const char* cleaner : {"status", "mount", "unmount"}) {
    INFO(cleaner);
    mount_archive(archive, mnt);
    const long long pid = status_number(mnt, "pid");
    REQUIRE(pid > 0);
    REQUIRE(::kill(static_cast<pid_t>(pid), SIGKILL) == 0);
    for (int i = 0; i < 200 && ::kill(static_cast<pid_t>(pid), 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    struct statfs sfs;
    CHECK(::statfs(mnt.c_str(), &sfs) != 0);  // ENOTCONN: the stale mount
    CHECK(errno == ENOTCONN);
    if (std::string(cleaner) == "status") {
      CommandResult status = run(cli() + " status " + quote(mnt));
      CHECK(status.exit_code == 1);
      CHECK(status.out.find("stale") != std::string::npos);
    } else if (std::string(cleaner) == "mount") {
      std::string out = mount_archive(archive, mnt);
      CHECK(out.find("stale") != std::string::npos);
      CHECK(read_file(mnt + "/node_modules/pkg-3/package.json") == read_file(dir / "t/node_modules/pkg-3/package.json"));
      CHECK(run(cli() + " unmount " + quote(mnt)).exit_code == 0);
    } else {
      CommandResult r = run(cli() + " unmount " + quote(mnt));
      CHECK(r.exit_code == 0);
      CHECK(r.out.find("stale") != std::string::npos);
    }
    struct stat st;
    CHECK(::stat(mnt.c_str(), &st) == 0);
    CHECK_FALSE(is_lazycache_mount_path(mnt));
  }
}

TEST_CASE("several saved paths of one archive mount at once; --all unmounts them", "[fuse]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "a", 10, 1);
  make_node_like_tree(dir / "b", 10, 2);
  pack_tree(dir.path(), {dir / "a", dir / "b"}, dir / "x.tar.zst");
  // Mounted where they were saved (no PATH: every root goes back to its original path).
  const std::string a = dir / "a", b = dir / "b";
  ::rename(a.c_str(), (dir / "a.src").c_str());
  ::rename(b.c_str(), (dir / "b.src").c_str());
  MountGuard ga(a), gb(b);
  CommandResult m = run(cli() + " mount --archive " + quote(dir / "x.tar.zst"));
  INFO(m.out);
  REQUIRE(m.exit_code == 0);
  CHECK(describe_tree(dir / "a.src") == describe_tree(a));
  CHECK(describe_tree(dir / "b.src") == describe_tree(b));
  CHECK(status_number(a, "pid") == status_number(b, "pid"));  // one daemon serves both
  CommandResult u = run(cli() + " unmount --all");
  INFO(u.out);
  CHECK(u.exit_code == 0);
  CHECK_FALSE(is_lazycache_mount_path(a));
  CHECK_FALSE(is_lazycache_mount_path(b));
}

namespace {

// Waits (up to a minute: a loaded machine) for the daemon's tree walk to end; its figures then.
void wait_walk_done(const std::string& mnt) {
  for (int i = 0; i < 600 && status_number(mnt, "warm_active") != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(status_number(mnt, "warm_active") == 0);
}

}  // namespace

TEST_CASE("the daemon lists the tree at mount: a job's first lookups are name-cache hits; --warm-names caps it, off skips it", "[fuse]") {
  // fs/tree_warmer.h: READDIRPLUS replies put every entry in the kernel's name cache (entry
  // timeout a day), so stat-ing every path afterwards sends no LOOKUP. Without the walk each
  // file's first stat is one.
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  make_node_like_tree(dir / "t", 60);
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  const std::string src = dir / "t";
  const long long entries = std::stoll(run("cd " + quote(src) + " && find . -mindepth 1 | wc -l").out);
  const long long dirs = std::stoll(run("cd " + quote(src) + " && find . -type d | wc -l").out);
  const long long files = std::stoll(run("cd " + quote(src) + " && find . -type f | wc -l").out);
  // Every path of the tree, stat-ed by name through the mount (no listing: a job opening by path).
  const std::string stat_all = "cd " + quote(src) + " && find . -mindepth 1 -printf '%P\\n' | (cd " + quote(mnt) +
                               " && xargs -d '\\n' stat -c %s > /dev/null)";
  {
    MountGuard guard(mnt);
    mount_archive(archive, mnt, "--fill none");  // the background fill reads data frames by design
    wait_walk_done(mnt);
    CHECK(status_number(mnt, "warm_entries") == entries);
    CHECK(status_number(mnt, "warm_directories") == dirs);
    CHECK(status_number(mnt, "store_range_reads") == 0);  // names only: no data was fetched
    const long long lookups = status_number(mnt, "requests_lookup");
    REQUIRE(run(stat_all).exit_code == 0);
    INFO("lookups before " << lookups << ", after " << status_number(mnt, "requests_lookup"));
    CHECK(status_number(mnt, "requests_lookup") - lookups < files / 20);
    CHECK(run(cli() + " unmount " + quote(mnt)).exit_code == 0);
  }
  {
    MountGuard guard(mnt);
    mount_archive(archive, mnt, "--warm-names off");
    CHECK(status_number(mnt, "warm_entries") == 0);
    CHECK(status_number(mnt, "requests_opendir") == 0);
    const long long lookups = status_number(mnt, "requests_lookup");
    REQUIRE(run(stat_all).exit_code == 0);
    CHECK(status_number(mnt, "requests_lookup") - lookups >= files);
    CHECK(run(cli() + " unmount " + quote(mnt)).exit_code == 0);
  }
  MountGuard guard(mnt);
  mount_archive(archive, mnt, "--warm-names 40");
  wait_walk_done(mnt);
  CHECK(status_number(mnt, "warm_entries") >= 40);
  CHECK(status_number(mnt, "warm_entries") < entries);
  CHECK(run(cli() + " mount --warm-names -3 --archive " + quote(archive) + " " + quote(dir / "mnt2")).exit_code == 2);
}

TEST_CASE("unmount right after the mount, while the daemon still lists the tree, succeeds at once", "[fuse]") {
  // The walk holds a directory of the mount open, so umount(2) says EBUSY: unmount must end the
  // walk (kStopTreeWarmSignal) and try again, and never report the daemon itself as a holder.
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  const std::string src = dir / "t";
  ::mkdir(src.c_str(), 0755);
  for (int i = 0; i < 100; ++i) {  // 10,000 directories: a walk of seconds
    const std::string d = src + "/d" + std::to_string(i);
    ::mkdir(d.c_str(), 0755);
    for (int j = 0; j < 100; ++j) ::mkdir((d + "/e" + std::to_string(j)).c_str(), 0755);
  }
  write_file(src + "/d7/e7/file", "x\n");
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  for (int round = 0; round < 3; ++round) {
    MountGuard guard(mnt);
    mount_archive(archive, mnt);
    const bool walking = status_number(mnt, "warm_active") == 1;
    if (!walking) WARN("round " << round << ": the walk had already ended before the unmount (a fast machine)");
    CommandResult u = run(cli() + " unmount " + quote(mnt));
    INFO("round " << round << ": " << u.out);
    CHECK(u.exit_code == 0);
    CHECK(u.out.find("busy") == std::string::npos);
    CHECK_FALSE(is_lazycache_mount_path(mnt));
  }
}

TEST_CASE("a file cut across two frames reaches the page cache as whole pages once both are decoded; reading it sends no READ", "[fuse]") {
  // fs/split_file_pages.h: b.bin starts in the frame of a/'s files and ends in the frame of c/'s
  // (64 KiB frames; the packer splits a member when a quarter frame of it is left over). Both
  // frames are worth decoding ahead for their small files; their parts of b.bin go to the page
  // cache as whole pages, the page straddling the boundary assembled from both.
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  const std::string src = dir / "t";
  ::mkdir(src.c_str(), 0755);
  for (const char* sub : {"a", "c"}) {
    ::mkdir((src + "/" + sub).c_str(), 0755);
    for (int f = 0; f < (sub[0] == 'a' ? 12 : 20); ++f)
      write_file(src + "/" + sub + "/f" + std::to_string(f), pattern(2500, static_cast<uint32_t>(f + sub[0])));
  }
  // a/'s members (with their pax mtime records) take ~52 KiB of the first frame: the cut falls
  // ~11.5 KiB into b.bin, inside its third page; c/'s files fill the second frame's other half.
  write_file(src + "/b.bin", pattern(40000, 5));
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  MountGuard guard(mnt);
  mount_archive(archive, mnt);
  wait_walk_done(mnt);
  for (int i = 0; i < 600 && status_number(mnt, "frames_pending") != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(status_number(mnt, "frames_pending") == 0);
  INFO(status_number(mnt, "archive_frames") << " frames, " << status_number(mnt, "frames_decoded_ahead") << " decoded ahead");
  // The second frame's whole pages, and the straddling first page (stored on a thread of their
  // own, after the decodes).
  for (int i = 0; i < 100 && status_number(mnt, "split_pieces_to_page_cache") < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(status_number(mnt, "split_pieces_to_page_cache") >= 2);
  const long long reads = status_number(mnt, "requests_read");
  same_output(src, mnt, "md5sum b.bin");
  // None, or one where the kernel dropped a page it took (DAMON reclaim on this VM: see below).
  CHECK(status_number(mnt, "requests_read") - reads <= 1);
  CHECK(status_number(mnt, "read_errors") == 0);
}

TEST_CASE("after the walk, the fill's frames reach the page cache before any read; reading every file then sends no READ", "[fuse]") {
  // Decode-ahead (FilesystemConfig::decode_ahead_bytes): the walk makes every file known to the
  // kernel, so each frame the fill brings is decoded and its files handed to the page cache
  // before the job reads them. Small files only, so that every frame can go whole. With
  // --decode-ahead off the fill only stores frames; the job's reads decode them.
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  const std::string src = dir / "t";
  ::mkdir(src.c_str(), 0755);
  for (int d = 0; d < 12; ++d) {
    const std::string sub = src + "/d" + std::to_string(d);
    ::mkdir(sub.c_str(), 0755);
    for (int f = 0; f < 30; ++f) write_file(sub + "/f" + std::to_string(f), pattern(2000 + static_cast<size_t>(f) * 131, 97u * d + f));
  }
  const long long files = 12 * 30;
  const std::string archive = pack(dir);
  const std::string mnt = dir / "mnt";
  const std::string read_all = "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat | md5sum";
  auto settle = [&] {  // the walk, then the fill and the decodes it queued
    wait_walk_done(mnt);
    for (int i = 0; i < 600 && status_number(mnt, "frames_pending") != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(status_number(mnt, "frames_pending") == 0);
  };
  {
    MountGuard guard(mnt);
    mount_archive(archive, mnt, "--decode-ahead off");
    settle();
    CHECK(status_number(mnt, "fill_bytes") > 0);
    CHECK(status_number(mnt, "frames_decoded") == 0);  // the fill only stored them
    CHECK(status_number(mnt, "files_to_page_cache") == 0);
    same_output(src, mnt, read_all);
    CHECK(status_number(mnt, "frames_decoded") > 3);
    CHECK(run(cli() + " unmount " + quote(mnt)).exit_code == 0);
  }
  MountGuard guard(mnt);
  mount_archive(archive, mnt);
  settle();
  const long long frames = status_number(mnt, "archive_frames");
  INFO(frames << " frames, " << status_number(mnt, "frames_decoded_ahead") << " decoded ahead");
  // The last may hold only the tar's end; under load a frame or two more may miss it (seen: 30
  // of 32 in a ctest -j2 on 2 cores; the memory share holds 128 of these frames, so it was not
  // room). Their files then go at their reads, as below.
  CHECK(status_number(mnt, "frames_decoded_ahead") >= frames * 9 / 10);
  // Before any read. Not every one: a decode right behind the walk's listing can find the
  // kernel not done making an inode the reply named (the store is refused; the open hands the
  // file off late, from the frame kept for it).
  const long long handed = status_number(mnt, "files_to_page_cache");
  INFO(handed << " of " << files << " files handed off before any read");
  CHECK(handed >= files * 9 / 10);
  CHECK(status_number(mnt, "decode_ahead_bytes") > 0);
  const long long reads = status_number(mnt, "requests_read");
  REQUIRE(reads >= 0);
  same_output(src, mnt, read_all);
  INFO("READs " << status_number(mnt, "requests_read") - reads);
  // One READ per file not handed off, and a few more: the kernel now and then drops a page it
  // took (seen: 1-12 single-page READs of 360 handed-off files with a CPU hog beside the test;
  // the READ decodes the frame and hands its files off again). A cause found in session 37: this
  // VM runs DAMON reclaim (kdamond, paddr, pageout of unmapped page cache in regions idle for 60
  // s), which evicted ~0.7 % of node's handed-off pages within 90 s of an idle mount (fincore).
  // Without the hand-off every file costs a READ.
  CHECK(status_number(mnt, "requests_read") - reads <= files - handed + files / 20);
  CHECK(status_number(mnt, "read_errors") == 0);
  CHECK(run(cli() + " mount --decode-ahead lots --archive " + quote(archive) + " " + quote(dir / "mnt2")).exit_code == 2);
}
