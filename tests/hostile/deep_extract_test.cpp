// SPDX-License-Identifier: MIT
// Deep trees extract in linear time with few descriptors, and stay safe: thousands of nested
// directories cost about one directory openat each (the extractor used to reopen every
// ancestor for every entry: O(depth^2)), the process never holds more than a bounded number of
// descriptors, and a symlink planted deep in the target is still never followed.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "common/byte_source.h"
#include "format/archive.h"
#include "format/extractor.h"
#include "tests/hostile/archive_forge.h"

namespace lazycache::hostile {
namespace {

namespace stdfs = std::filesystem;

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (stdfs::temp_directory_path() / "lc-deep-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    // std::filesystem::remove_all walks by path and fails past PATH_MAX: remove deepest first.
    std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path.c_str());
  }
};

size_t open_descriptors() {
  size_t n = 0;
  for (const auto& e : stdfs::directory_iterator("/proc/self/fd")) n += e.path().filename() != "." ? 1 : 0;
  return n;
}

// A chain of `depth` directories "d", each holding a file "f<level>"; every 500 levels a side
// chain of 100 directories, so the walk jumps back above its descriptor window.
std::unique_ptr<format::ArchiveReader> deep_archive(int depth) {
  ArchiveForge f;
  uint32_t d = f.root();
  for (int i = 0; i < depth; ++i) {
    d = f.add_dir(d, "d");
    f.add_file(d, "f" + std::to_string(i), "level " + std::to_string(i) + "\n");
    if (i % 500 == 250) {
      uint32_t side = f.add_dir(d, "side");
      for (int k = 0; k < 100; ++k) side = f.add_dir(side, "s");
      f.add_file(side, "leaf", "side " + std::to_string(i) + "\n");
    }
  }
  auto bytes = f.build();
  REQUIRE(bytes.ok());
  auto reader = format::ArchiveReader::open(std::make_shared<MemorySource>(*bytes, "deep archive"));
  INFO((reader.ok() ? std::string() : reader.error().to_string()));
  REQUIRE(reader.ok());
  return std::move(reader).value();
}

// Reads target/data/d/d/.../f<level> by walking with openat (the path is longer than PATH_MAX).
std::string read_level(const std::string& target, int level) {
  int fd = ::open((target + "/data").c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  for (int i = 0; i <= level; ++i) {
    int next = ::openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    ::close(fd);
    REQUIRE(next >= 0);
    fd = next;
  }
  int file = ::openat(fd, ("f" + std::to_string(level)).c_str(), O_RDONLY | O_NOFOLLOW);
  ::close(fd);
  REQUIRE(file >= 0);
  char buf[64];
  ssize_t n = ::read(file, buf, sizeof buf);
  ::close(file);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

struct Run {
  format::ExtractStats stats;
  size_t entries = 0;
  size_t peak_fds = 0;
  double seconds = 0;
};

Run extract_deep(int depth, const std::string& target) {
  auto reader = deep_archive(depth);
  Run run;
  run.entries = reader->index().entry_count();
  const size_t before = open_descriptors();
  format::ExtractConfig cfg;
  cfg.targets = format::targets_under(reader->index(), target);
  cfg.threads = 1;
  cfg.warn = [](const std::string&) {};
  cfg.progress = [&](const format::ExtractProgress&) { run.peak_fds = std::max(run.peak_fds, open_descriptors() - before); };
  const auto t0 = std::chrono::steady_clock::now();
  auto stats = format::extract_archive(*reader, cfg);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  run.stats = *stats;
  CHECK(read_level(target, 0) == "level 0\n");
  CHECK(read_level(target, depth - 1) == "level " + std::to_string(depth - 1) + "\n");
  return run;
}

TEST_CASE("a tree 2,000 levels deep extracts with one directory open per entry and bounded descriptors") {
  TempDir tmp;
  double per_entry_small = 0;
  for (int depth : {500, 2000}) {
    const std::string target = tmp.path + "/t" + std::to_string(depth);
    Run run = extract_deep(depth, target);
    const double per_entry = static_cast<double>(run.stats.dir_opens) / static_cast<double>(run.entries);
    std::printf("depth %d: %zu entries, %llu directory openat (%.2f per entry), peak %zu extra descriptors, %.2f s\n", depth, run.entries,
                static_cast<unsigned long long>(run.stats.dir_opens), per_entry, run.peak_fds, run.seconds);
    // Directories are opened about twice (creating their children, setting their metadata);
    // side-chain jumps reopen at most a window's worth. Quadratic would be ~depth/2 per entry.
    CHECK(per_entry < 3.0);
    // Two walks (the writer's and format/dirs_ahead.h's), each the window (64) and the checkpoints
    // (depth / 64), the output file and the pipeline's few. Still bounded in the depth.
    CHECK(run.peak_fds <= 2 * (2 * 64 + static_cast<size_t>(depth) / 64) + 16);
    if (depth == 500) per_entry_small = per_entry;
    else CHECK(per_entry < per_entry_small * 1.5);  // linear: the cost per entry does not grow with depth
  }
}

TEST_CASE("a symlink planted deep in the target is not followed by a second extraction") {
  TempDir tmp;
  const std::string target = tmp.path + "/t", outside = tmp.path + "/outside";
  REQUIRE(::mkdir(outside.c_str(), 0755) == 0);
  extract_deep(300, target);
  // Replace target/data/d x 200 (far above the 64-level window of the deepest point) with a symlink.
  std::string rel = "data";
  for (int i = 0; i < 200; ++i) rel += "/d";
  const std::string parent_rel = rel.substr(0, rel.size() - 2);
  int parent = ::open((target + "/" + parent_rel).c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(parent >= 0);
  REQUIRE(::renameat(parent, "d", parent, "moved") == 0);
  REQUIRE(::symlinkat(outside.c_str(), parent, "d") == 0);
  ::close(parent);

  auto reader = deep_archive(300);
  format::ExtractConfig cfg;
  cfg.targets = format::targets_under(reader->index(), target);
  cfg.warn = [](const std::string&) {};
  auto stats = format::extract_archive(*reader, cfg);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.error().code() == ErrorCode::kPermissionDenied);
  INFO(stats.error().to_string());
  CHECK(stats.error().message().find("symlink") != std::string::npos);
  CHECK(stats.error().message().find("'" + rel) != std::string::npos);  // names the entry by its path
  CHECK(stdfs::is_empty(outside));
}

}  // namespace
}  // namespace lazycache::hostile
