// SPDX-License-Identifier: MIT
// Parallel file writers (issue 16 item 3): a new target extracted by several writer threads is
// the same tree, to the mode, mtime and hardlink group, as the source and as one thread's
// extraction; and FileWriterPool's own promises (its frame bound, the first error stops it).
#include <catch2/catch.hpp>

#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "archive_test_util.h"
#include "format/file_writer_pool.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

namespace {

// Files at every depth of a 24-level chain and in 30 sibling directories, of every size class
// (empty, tiny, several frames, a hole), modes a writer must get right (read-only, executable,
// setuid: set after the data), hardlinks across directories, a symlink to a directory that sorts
// before it, followed by entries under the directory's name.
int make_tree(const std::string& root) {
  int files = 0;
  REQUIRE(::mkdir(root.c_str(), 0755) == 0);
  std::string deep = root;
  for (int d = 0; d < 24; ++d) {
    deep += "/d" + std::to_string(d);
    REQUIRE(::mkdir(deep.c_str(), 0755) == 0);
    write_file(deep + "/f", pattern(static_cast<size_t>(d) * 97 + 1, static_cast<uint64_t>(d)), 0644);
    ++files;
  }
  for (int s = 0; s < 30; ++s) {
    const std::string dir = root + "/s" + std::to_string(s);
    REQUIRE(::mkdir(dir.c_str(), 0750) == 0);
    for (int f = 0; f < 20; ++f) {
      const mode_t mode = f % 7 == 0 ? 0444 : f % 7 == 1 ? 0755 : f % 7 == 2 ? 04755 : f % 7 == 3 ? 0600 : 0644;
      write_file(dir + "/f" + std::to_string(f),
                 f % 9 == 0 ? std::string()
                            : pattern(static_cast<size_t>(s) * 131 + static_cast<size_t>(f) * 17,
                                      static_cast<uint64_t>(s) * 100 + static_cast<uint64_t>(f)),
                 mode);
      set_mtime(dir + "/f" + std::to_string(f), 1600000000 + s * 100 + f, f * 1000);
      ++files;
    }
  }
  write_file(root + "/big", pattern(5u << 20, 7), 0640);  // spans frames: the taking thread writes it
  ++files;
  std::string holes(3u << 20, '\0');
  holes.replace(0, 5, "start");
  holes.replace(holes.size() - 3, 3, "end");
  write_file(root + "/s3/sparse", holes, 0644);
  ++files;
  REQUIRE(::link((root + "/s1/f5").c_str(), (root + "/d0/d1/linked").c_str()) == 0);
  REQUIRE(::link((root + "/s1/f5").c_str(), (root + "/s29/linked").c_str()) == 0);
  files += 2;
  REQUIRE(::symlink("zlib", (root + "/alib").c_str()) == 0);
  REQUIRE(::mkdir((root + "/zlib").c_str(), 0755) == 0);
  write_file(root + "/zlib/entry", "z\n", 0644);
  ++files;
  REQUIRE(::symlink("/usr/bin/python3", (root + "/s2/python3").c_str()) == 0);
  for (int s = 0; s < 30; ++s) {
    const std::string dir = root + "/s" + std::to_string(s);
    set_mtime(dir, 1500000000 + s, 0);
  }
  deep = root;
  for (int d = 0; d < 24; ++d) {  // some levels read-only, once everything below them is written
    deep += "/d" + std::to_string(d);
    if (d % 5 == 4) REQUIRE(::chmod(deep.c_str(), 0500) == 0);
  }
  return files;
}

}  // namespace

TEST_CASE("several file writers give the tree one writer gives, and the source's", "[format][writers]") {
  TempDir src, work;
  const int files = make_tree(src / "r");
  set_mtime(src / "r", 1400000000, 5);
  format::PackConfig pack;
  pack.frame_size_bytes = 256u << 10;  // many frames: files at frame edges, several in flight
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", pack);
  auto reader = open_archive(work / "a.tar.zst");
  for (int writers : {1, 8}) {
    INFO("writers " << writers);
    const std::string out = work / ("out" + std::to_string(writers));
    format::ExtractConfig config;
    config.writers = writers;
    auto stats = extract_to(*reader, out, config);  // `out` does not exist: a staged target
    INFO((stats.ok() ? std::string() : stats.error().to_string()));
    REQUIRE(stats.ok());
    CHECK(stats->files + stats->hardlinks == static_cast<uint64_t>(files));
    if (writers == 1) CHECK(stats->files_by_writers == 0);
    else CHECK(stats->files_by_writers > stats->files / 2);  // all but the frame-spanning ones
    CHECK(compare_trees(src / "r", out + "/r") == "");
  }
  CHECK(compare_trees(work / "out1/r", work / "out8/r") == "");
}

TEST_CASE("file writers are used for a new target only; into an existing one every file is still right", "[format][writers]") {
  TempDir src, work;
  make_tree(src / "r");
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  REQUIRE(::mkdir((work / "existing").c_str(), 0755) == 0);
  format::ExtractConfig config;
  config.writers = 8;
  auto stats = extract_to(*reader, work / "existing", config);
  REQUIRE(stats.ok());
  CHECK(stats->files_by_writers == 0);
  CHECK(compare_trees(src / "r", work / "existing/r") == "");
}

TEST_CASE("FileWriterPool: a job of a second frame never runs while the bound is full", "[format][writers]") {
  const auto frame = [](char c) {
    auto f = std::make_shared<ByteBuffer>(8);
    std::memset(f->data(), c, f->size());
    return std::shared_ptr<const ByteBuffer>(std::move(f));
  };
  format::FileWriterPool pool(4, 8);  // one 8-byte frame at a time
  std::atomic<bool> b_ran{false}, b_seen_during_a{false};
  auto fa = frame('a'), fb = frame('b');
  for (int i = 0; i < 3; ++i) {
    REQUIRE(pool.submit(fa,
                        [&] {
                          // With the bound honoured, no job of frame b starts before every job of frame a is done;
                          // a broken bound lets one start meanwhile, which this wait sees (a correct pool just waits).
                          for (int k = 0; k < 50 && !b_ran.load(); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                          if (b_ran.load()) b_seen_during_a = true;
                          return Status();
                        })
                .ok());
  }
  REQUIRE(pool.submit(fb,
                      [&] {
                        b_ran = true;
                        return Status();
                      })
              .ok());
  REQUIRE(pool.finish().ok());
  CHECK(b_ran.load());
  CHECK_FALSE(b_seen_during_a.load());
}

TEST_CASE("FileWriterPool: the first error is returned and nothing queued after it runs", "[format][writers]") {
  format::FileWriterPool pool(1, 1 << 20);
  std::atomic<int> later_ran{0};
  REQUIRE(pool.submit(nullptr, [] { return Status(ErrorCode::kIo, "disk full writing x"); }).ok());
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i)
    s = pool.submit(nullptr, [&] {
      ++later_ran;
      return Status();
    });
  Status done = pool.finish();
  REQUIRE_FALSE(done.ok());
  CHECK(done.code() == ErrorCode::kIo);
  CHECK_THAT(done.message(), Catch::Contains("disk full writing x"));
  CHECK(later_ran.load() == 0);
}

TEST_CASE("files spanning frames are written in pieces by the writers, byte for byte, holes kept", "[format][writers]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  write_file(src / "r/big", pattern(3u << 20, 11), 0640);  // 12 frames of 256 KiB
  std::string tail_hole(2u << 20, '\0');                   // data, then a hole to the end
  tail_hole.replace(0, 70000, pattern(70000, 3));
  write_file(src / "r/tail_hole", tail_hole, 0644);
  write_file(src / "r/zeros", std::string(1u << 20, '\0'), 0600);  // a hole only
  std::string middle(1u << 20, 'm');                               // a hole between data
  std::fill(middle.begin() + 300000, middle.begin() + 700000, '\0');
  write_file(src / "r/middle", middle, 0755);
  write_file(src / "r/small", "s\n", 0644);
  format::PackConfig pack;
  pack.frame_size_bytes = 256u << 10;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", pack);
  auto reader = open_archive(work / "a.tar.zst");
  for (int writers : {1, 4}) {
    INFO("writers " << writers);
    const std::string out = work / ("out" + std::to_string(writers));
    format::ExtractConfig config;
    config.writers = writers;
    auto stats = extract_to(*reader, out, config);
    INFO((stats.ok() ? std::string() : stats.error().to_string()));
    REQUIRE(stats.ok());
    CHECK(stats->files == 5);
    // One writer: the calling thread writes everything; several: every file, the split ones too.
    CHECK(stats->files_by_writers == (writers == 1 ? 0u : 5u));
    CHECK(compare_trees(src / "r", out + "/r") == "");
    struct stat st;
    REQUIRE(::stat((out + "/r/zeros").c_str(), &st) == 0);
    CHECK(st.st_size == (1 << 20));
    CHECK(st.st_blocks * 512 < (1 << 20) / 2);  // left sparse, not written
    REQUIRE(::stat((out + "/r/tail_hole").c_str(), &st) == 0);
    CHECK(st.st_size == (2 << 20));  // the ftruncate after the pieces: the hole reaches the end
  }
  CHECK(compare_trees(work / "out1/r", work / "out4/r") == "");
}

TEST_CASE("directories made ahead by their own thread give the tree the write walk gives", "[format][writers]") {
  TempDir src, work;
  make_tree(src / "r");
  for (int s = 0; s < 40; ++s) REQUIRE(::mkdir((src / ("r/empty" + std::to_string(s))).c_str(), 0705) == 0);  // no entry walks there
  set_mtime(src / "r", 1400000000, 5);
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  for (bool ahead : {false, true}) {
    INFO("dirs_ahead " << ahead);
    const std::string out = work / (ahead ? "ahead" : "walk");
    format::ExtractConfig config;
    config.dirs_ahead = ahead;
    auto stats = extract_to(*reader, out, config);
    INFO((stats.ok() ? std::string() : stats.error().to_string()));
    REQUIRE(stats.ok());
    if (!ahead) CHECK(stats->dirs_ahead == 0);
    else CHECK(stats->dirs_ahead == stats->dirs);  // every directory below the target, made or met
    CHECK(compare_trees(src / "r", out + "/r") == "");
  }
  CHECK(compare_trees(work / "walk/r", work / "ahead/r") == "");
}
