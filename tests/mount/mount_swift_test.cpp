// SPDX-License-Identifier: MIT
// Real FUSE mounts of entries saved to an S3 server (the `swift` CTest fixture: Swift s3api, the
// strict SigV4 server): `save --store s3://...`, then `mount --store s3://... --key K`, so the
// whole path (S3 store, ranged GETs, fetcher, chunk cache, FUSE) runs as a CI job would run it.
// Needs LC_S3_ENV (the env file tests/servers/swift-s3.sh writes); skipped without /dev/fuse.
// Every mount is unmounted in teardown (MountGuard), even on failure.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "mount_test_util.h"

using namespace lazycache::testing;

namespace {

// KEY=VALUE lines of the server's env file; the credentials go to the CLI through the AWS_*
// environment, never on a command line (which the test output could show).
struct SwiftStore {
  std::string endpoint;
  std::string options;  // --store ... --endpoint ...
};

SwiftStore swift_store(const std::string& prefix) {
  const char* path = std::getenv("LC_S3_ENV");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  INFO("env file " << path);
  REQUIRE(in.good());
  std::map<std::string, std::string> kv;
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  REQUIRE(!kv["S3_ENDPOINT"].empty());
  ::setenv("AWS_ACCESS_KEY_ID", kv["S3_ACCESS_KEY"].c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", kv["S3_SECRET_KEY"].c_str(), 1);
  ::setenv("AWS_REGION", kv["S3_REGION"].c_str(), 1);
  SwiftStore s;
  s.endpoint = kv["S3_ENDPOINT"];
  s.options = "--store " + quote("s3://lazycache/" + prefix) + " --endpoint " + quote(s.endpoint);
  return s;
}

std::string unique_prefix() {
  return "mount-test/" + std::to_string(::getpid()) + "-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

void must_run(const std::string& command) {
  CommandResult r = run(command);
  INFO(command << "\n" << r.out);
  REQUIRE(r.exit_code == 0);
}

// The mount daemons' logs (RUN_DIR/mount-*.log): printed when a check of the mount fails.
std::string daemon_logs(const MountEnv& env) {
  const std::string logs = quote(env.run_dir) + "/mount-*.log";
  // A sanitizer report from its first line to its summary (the shadow-byte map is noise), else
  // the last lines.
  CommandResult report = run("sed -n '/ERROR: [A-Za-z]*Sanitizer/,/^SUMMARY/p' " + logs + " | head -n 120");
  return report.out.empty() ? run("tail -n 30 " + logs).out : report.out;
}

// Reads every file of the mount; a failed read fails the test with the reader's error and the
// daemon's log, which names the frame and the cause.
void read_everything(const std::string& mnt, const MountEnv& env) {
  CommandResult r = run("cd " + quote(mnt) + " && find . -type f -print0 | xargs -0 -r cat > /dev/null");
  if (r.exit_code != 0) FAIL("reading every file of " << mnt << " failed:\n" << r.out << "\ndaemon log:\n" << daemon_logs(env));
}

// The mount must still be there; if not, fail with what `status` says and the daemon's log.
void still_mounted(const std::string& mnt, const MountEnv& env, const char* when) {
  if (is_lazycache_mount_path(mnt)) return;
  FAIL("the mount at " << mnt << " is gone " << when << "; status:\n"
                       << run(cli() + " status " + quote(mnt)).out << "\ndaemon log:\n"
                       << daemon_logs(env));
}

std::vector<std::string> files_of(const std::string& root) {
  std::vector<std::string> files;
  CommandResult list = run("cd " + quote(root) + " && find . -type f");
  std::istringstream in(list.out);
  for (std::string line; std::getline(in, line);) files.push_back(line.substr(1));
  return files;
}

}  // namespace

TEST_CASE("an entry saved to Swift mounts lazily, reads back identical, and a second mount reads from the chunk cache", "[fuse][swift]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  const SwiftStore store = swift_store(unique_prefix());
  const std::string src = dir / "t";
  make_node_like_tree(src, 150);
  write_file(src + "/node_modules/large.bin", pattern(3 << 20, 5));
  REQUIRE(::symlink("/nonexistent/dangling", (src + "/dangling").c_str()) == 0);
  // Small frames, so that one small file is a small part of the archive.
  must_run(cli() + " save " + store.options + " --frame-size 64K --part-size 5M --key k1 " + quote(src));
  const std::string mnt = dir / "mnt";
  ::mkdir(mnt.c_str(), 0755);
  const std::string mount_cmd = cli() + " mount " + store.options + " --any-paths --key k1 --prefetch none " + quote(mnt);
  const std::string small = "/node_modules/pkg-42/package.json";
  {
    MountGuard guard(mnt);
    must_run(mount_cmd);
    REQUIRE(is_lazycache_mount_path(mnt));
    CHECK(status_number(mnt, "mount_range_reads") == 1);  // the tail holds the index
    CHECK(status_number(mnt, "store_range_reads") == 0);

    // Laziness, by the mount's own counters: one small file costs one range read of its frame.
    CHECK(read_file(mnt + small) == read_file(src + small));
    const long long archive = status_number(mnt, "archive_bytes");
    CHECK(status_number(mnt, "store_range_reads") == 1);
    CHECK(status_number(mnt, "frames_from_store") <= 2);
    CHECK(status_number(mnt, "store_bytes") > 0);
    CHECK(status_number(mnt, "store_bytes") <= 2 * (64 << 10) + 4096);
    CHECK(status_number(mnt, "store_bytes") * 20 < archive);

    // Everything against the source: content, types, modes, link counts, sizes, symlink targets,
    // mtimes; listings as tools print them.
    read_everything(mnt, env);
    still_mounted(mnt, env, "after reading every file");
    // Writable (an entry of the store): as root a kernel overlay, whose root reports one link.
    CHECK(describe_tree_but_root_links(src) == describe_tree_but_root_links(mnt));
    still_mounted(mnt, env, "after describing the tree");
    same_output(src, mnt, "find . | LC_ALL=C sort");
    same_output(src, mnt, "ls -lR --time-style=full-iso . | grep -v '^total' | awk '$1 !~ /^d/' | tr -s ' '");
    same_output(src, mnt, "find . -type l -print0 | LC_ALL=C sort -z | xargs -0 readlink");
    same_output(src, mnt, "find . -type f -links +1 -printf '%n %i %p\\n' | LC_ALL=C sort -k3 | awk '{print $1, $3}'");
    same_output(src, mnt, "find . -mindepth 1 ! -type l -print0 | LC_ALL=C sort -z | xargs -0 stat -c '%n %F %a %h %Y'");
    same_output(src, mnt, "stat -c '%n %F %a %Y' .");
    // Hardlinks share one inode on the mount as on the disk.
    struct stat a {
    }, b{};
    REQUIRE(::stat((mnt + "/node_modules/pkg-17/package.json").c_str(), &a) == 0);
    REQUIRE(::stat((mnt + "/node_modules/pkg-17/package.hardlink.json").c_str(), &b) == 0);
    CHECK(a.st_ino == b.st_ino);
    CHECK(a.st_nlink == 2);

    // 16 threads reading random files at once.
    const std::vector<std::string> files = files_of(src);
    REQUIRE(files.size() > 300);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(t) + 100);
        for (int i = 0; i < 30; ++i) {
          const std::string& f = files[rng() % files.size()];
          if (read_file(mnt + f) != read_file(src + f)) ++bad;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(bad == 0);
    CHECK(status_number(mnt, "read_errors") == 0);
    CommandResult r = run(cli() + " unmount " + quote(mnt));
    INFO(r.out);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(is_lazycache_mount_path(mnt));
  }
  // Second mount: every file again, with nothing from the store (the chunk cache has it all).
  MountGuard guard(mnt);
  must_run(mount_cmd);
  read_everything(mnt, env);
  still_mounted(mnt, env, "after reading every file (second mount)");
  CHECK(describe_tree_but_root_links(src) == describe_tree_but_root_links(mnt));
  CHECK(status_number(mnt, "store_range_reads") == 0);
  CHECK(status_number(mnt, "store_bytes") == 0);
  CHECK(status_number(mnt, "frames_from_chunk_cache") >= 1);
  CHECK(status_number(mnt, "read_errors") == 0);
  CommandResult r = run(cli() + " unmount --json " + quote(mnt));
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"store_range_reads\":0") != std::string::npos);
}

// The mount's lookup of an exact key is a read of the entry's last MiB (no HEAD first), which
// holds the index of a tree of ~9,000 files: one request. With the old 256 KiB tail read after a
// HEAD this took two range reads (and three requests).
TEST_CASE("an exact key mounts after one range read: the lookup's tail read brings an index over 256 KiB", "[fuse][swift]") {
  if (!fuse_available()) return;
  MountEnv env;
  TempDir dir;
  const SwiftStore store = swift_store(unique_prefix());
  const std::string src = dir / "deps";
  ::mkdir(src.c_str(), 0755);
  for (int d = 0; d < 120; ++d) {
    const std::string sub = src + "/d" + std::to_string(d);
    ::mkdir(sub.c_str(), 0755);
    for (int f = 0; f < 100; ++f) write_file(sub + "/f" + std::to_string(f) + ".js", "module " + std::to_string(d * 100 + f) + "\n");
  }
  must_run(cli() + " save " + store.options + " --key exact " + quote(src));
  CommandResult info = run(cli() + " info " + store.options + " --key exact");
  INFO(info.out);
  // The case this test is about: an index that a 256 KiB tail does not hold ("index + table:
  // 415.3 KiB").
  const size_t at = info.out.find("index + table:");
  REQUIRE(at != std::string::npos);
  std::istringstream line(info.out.substr(at + std::string("index + table:").size()));
  double amount = 0;
  std::string unit;
  line >> amount >> unit;
  REQUIRE(((unit == "KiB" && amount > 256) || unit == "MiB"));
  const std::string orig = dir / "deps.orig";
  REQUIRE(::rename(src.c_str(), orig.c_str()) == 0);
  ::mkdir(src.c_str(), 0755);
  MountGuard guard(src);
  must_run(cli() + " mount " + store.options + " --key exact --prefetch none " + quote(src));  // at the saved path: the exact name
  REQUIRE(is_lazycache_mount_path(src));
  CHECK(status_number(src, "mount_range_reads") == 1);
  CHECK(status_number(src, "archive_bytes") > (256 << 10));
  CHECK(read_file(src + "/d119/f99.js") == read_file(orig + "/d119/f99.js"));
}
