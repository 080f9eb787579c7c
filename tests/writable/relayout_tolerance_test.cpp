// SPDX-License-Identifier: MIT
// write_incremental_archive's relayout rule (format/incremental_writer.h, learned layout): a
// learned list whose files differ from the base's hot list by at most 10 % keeps the base
// layout (its frames are copied, the hot files stay where they are); by more, the learned files
// are laid out again, together and in the learned order. Only the public API is used: the
// layout is read back from the output's index.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "format/archive_test_util.h"
#include "format/incremental_writer.h"
#include "format/tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

namespace {

constexpr uint64_t kFrameBytes = 8 << 10;  // a few files per frame: units are small

std::string file_path(int d, int f) { return "src/d" + std::to_string(d) + "/f" + std::to_string(f); }

// 4 directories x 10 files of 0.6-2.5 KiB; directory mtimes pinned so an unchanged tree packs to
// the same headers.
void make_tree(const std::string& cwd) {
  REQUIRE(::mkdir((cwd + "/src").c_str(), 0755) == 0);
  for (int d = 0; d < 4; ++d) {
    REQUIRE(::mkdir((cwd + "/src/d" + std::to_string(d)).c_str(), 0755) == 0);
    for (int f = 0; f < 10; ++f)
      write_file(cwd + "/" + file_path(d, f), pattern(600 + static_cast<size_t>((d * 10 + f) * 53 % 1900),
                                                      static_cast<uint64_t>(d) * 10 + static_cast<uint64_t>(f) + 1));
  }
  REQUIRE(std::system(("find '" + cwd + "/src' -type d -exec touch -h -d @1700000000 {} +").c_str()) == 0);
}

// The base's hot list: 20 of the 40 files, every other one, in a scattered order.
std::vector<std::string> base_hot() {
  std::vector<std::string> hot;
  for (int f = 0; f < 10; f += 2)
    for (int d = 3; d >= 0; --d) hot.push_back(file_path(d, f));
  return hot;
}

format::PackConfig config(std::vector<std::string> hot) {
  format::PackConfig c;
  c.frame_size_bytes = kFrameBytes;
  c.threads = 1;
  c.hot_paths = std::move(hot);
  c.warn = [](const std::string&) {};
  return c;
}

// The incremental archive of cwd/src over `base` with `learned` as the hot paths; base frames
// are cut from the base file's bytes held in memory.
format::IncrementalStats save_incremental(const std::string& cwd, const std::string& base, const std::vector<std::string>& learned,
                                          const std::string& out) {
  const std::string base_bytes = read_file(base);
  auto reader = open_archive(base);
  format::IncrementalBase inc;
  inc.index = reader->shared_index();
  inc.fetch_frames = [&](uint32_t first, uint32_t last) -> Result<std::string> {
    const auto frames = inc.index->frames();
    const uint64_t from = frames[first].compressed_offset;
    return base_bytes.substr(from, frames[last].compressed_offset + frames[last].compressed_size - from);
  };
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old) != nullptr);
  REQUIRE(::chdir(cwd.c_str()) == 0);
  auto sink = LocalFileSink::create(out);
  REQUIRE(sink.ok());
  auto stats = format::write_incremental_archive({format::PackRoot{"src"}}, inc, {}, **sink, config(learned));
  REQUIRE(::chdir(old) == 0);
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  return *stats;
}

struct Layout {
  std::vector<std::string> hot;             // the index hot list, as paths
  std::map<std::string, uint64_t> offsets;  // regular file path -> data offset in the stream
  size_t frames = 0;
};

Layout layout_of(const std::string& archive) {
  auto reader = open_archive(archive);
  const auto& idx = reader->index();
  Layout l;
  for (auto id : idx.hot_list()) l.hot.push_back(idx.path(id));
  for (uint32_t id = 0; id < idx.entry_count(); ++id)
    if (idx.entry(id).type == format::EntryType::kRegular) l.offsets[idx.path(id)] = idx.entry(id).data_offset;
  l.frames = idx.frames().size();
  return l;
}

// `hot` with its last `n` files swapped for files that were not hot (odd-numbered ones).
std::vector<std::string> with_replaced(std::vector<std::string> hot, int n) {
  for (int i = 0; i < n; ++i) hot[hot.size() - 1 - static_cast<size_t>(i)] = file_path(i % 4, 1 + 2 * (i / 4));
  return hot;
}

struct Base {
  TempDir t;
  Layout layout;
  Base() {
    make_tree(t.path());
    pack_paths(t.path(), {"src"}, t / "base", config(base_hot()));
    layout = layout_of(t / "base");
    REQUIRE(layout.hot == base_hot());
    REQUIRE(layout.frames >= 8);
  }
};

}  // namespace

TEST_CASE("the same hot files read in another order keep the base layout byte for byte", "[incremental]") {
  Base b;
  auto learned = base_hot();
  std::reverse(learned.begin(), learned.end());
  auto stats = save_incremental(b.t.path(), b.t / "base", learned, b.t / "inc");
  // Only the frame with the end-of-archive blocks is compressed again.
  CHECK(stats.frames_compressed == 1);
  CHECK(stats.frames_reused + 1 == b.layout.frames);
  CHECK(read_file(b.t / "inc") == read_file(b.t / "base"));
}

TEST_CASE("a learned list 10 % away from the base's hot list keeps the layout", "[incremental]") {
  Base b;
  // One file out, one in: 2 differences against 20 files.
  auto learned = with_replaced(base_hot(), 1);
  REQUIRE(learned != base_hot());
  auto stats = save_incremental(b.t.path(), b.t / "base", learned, b.t / "inc");
  CHECK(stats.frames_compressed == 1);
  CHECK(stats.frames_reused + 1 == b.layout.frames);
  const Layout inc = layout_of(b.t / "inc");
  CHECK(inc.offsets == b.layout.offsets);  // every file where the base had it
  // The hot list is the base's, then the learned file it lacked.
  std::vector<std::string> want = base_hot();
  want.push_back(learned.back());
  CHECK(inc.hot == want);
}

TEST_CASE("a learned list more than 10 % away lays the learned files out again, together and in its order", "[incremental]") {
  Base b;
  // Three out, three in: 6 differences against 20 files (30 %; 15 % counted one way only).
  auto learned = with_replaced(base_hot(), 3);
  auto stats = save_incremental(b.t.path(), b.t / "base", learned, b.t / "inc");
  const Layout inc = layout_of(b.t / "inc");
  CHECK(inc.hot == learned);
  CHECK(stats.files_compressed >= learned.size());  // the learned files were packed again
  CHECK(stats.frames_compressed > 1);
  // One region for the next mount to prefetch: the learned files in the learned order, no
  // other file's data between them (where the region sits is the writer's choice).
  uint64_t first = UINT64_MAX, previous = 0;
  for (const auto& p : learned) {
    INFO(p);
    CHECK(inc.offsets.at(p) >= previous);
    previous = inc.offsets.at(p);
    first = std::min(first, previous);
  }
  const std::set<std::string> hot(learned.begin(), learned.end());
  for (const auto& [p, off] : inc.offsets) {
    INFO(p);
    if (!hot.count(p)) CHECK((off < first || off > previous));
  }
  // The files swapped in were outside the base's hot region: they moved.
  for (size_t i = learned.size() - 3; i < learned.size(); ++i) CHECK(inc.offsets.at(learned[i]) != b.layout.offsets.at(learned[i]));
}
