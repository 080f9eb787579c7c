// SPDX-License-Identifier: MIT
// Round trips: pack a generated tree, extract it, compare (content, modes, mtimes, links).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include "archive_test_util.h"
#include "format/verify.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

namespace {

void roundtrip(const TempDir& src, const std::string& root, format::PackConfig config = {}) {
  TempDir work;
  pack_paths(src.path(), {root}, work / "a.tar.zst", config);
  auto reader = open_archive(work / "a.tar.zst");
  auto v = format::verify_archive(*reader);
  INFO((v.ok() ? std::string() : v.error().to_string()));
  REQUIRE(v.ok());
  auto stats = extract_to(*reader, work / "out");
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  CHECK(compare_trees(src / root, work / ("out/" + root)) == "");
}

}  // namespace

TEST_CASE("round trip: mixed tree with modes, nanosecond mtimes, symlinks, hardlinks, empty files and dirs", "[format]") {
  TempDir src;
  REQUIRE(::mkdir((src / "t").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "t/sub").c_str(), 0700) == 0);
  REQUIRE(::mkdir((src / "t/empty-dir").c_str(), 0755) == 0);
  write_file(src / "t/zero", "");
  write_file(src / "t/exec.sh", "#!/bin/sh\necho hi\n", 0755);
  write_file(src / "t/sub/setgid", "x", 02750);
  write_file(src / "t/sub/big", pattern(3 * 1024 * 1024 + 17, 1));
  write_file(src / "t/a", pattern(100, 2));
  REQUIRE(::link((src / "t/a").c_str(), (src / "t/sub/a-link").c_str()) == 0);
  REQUIRE(::symlink("../a", (src / "t/sub/rel-link").c_str()) == 0);
  REQUIRE(::symlink("sub/big", (src / "t/link-to-big").c_str()) == 0);
  set_mtime(src / "t/a", 1234567890, 123456789);
  set_mtime(src / "t/zero", 0, 1);
  set_mtime(src / "t/sub/rel-link", 1600000000, 999999999);
  set_mtime(src / "t/sub", 1500000000, 5);
  format::PackConfig config;
  config.frame_size_bytes = 64 * 1024;  // many frames, so big files are split
  roundtrip(src, "t", config);
}

TEST_CASE("round trip: 10,000 files in one directory", "[format]") {
  TempDir src;
  REQUIRE(::mkdir((src / "many").c_str(), 0755) == 0);
  for (int i = 0; i < 10000; ++i) write_file(src / ("many/f" + std::to_string(i)), std::to_string(i * 7919));
  format::PackConfig config;
  config.frame_size_bytes = 256 * 1024;
  roundtrip(src, "many", config);
}

TEST_CASE("round trip: names with spaces, unicode, newlines; 255-byte names; 4 KiB paths", "[format]") {
  TempDir src, work;
  // Relative paths from inside `src`: the deepest path is about 4 KiB, over PATH_MAX once
  // prefixed with the temporary directory, so the writer and extractor must walk with openat.
  char old[4096];
  REQUIRE(::getcwd(old, sizeof old) != nullptr);
  REQUIRE(::chdir(src.path().c_str()) == 0);
  REQUIRE(::mkdir("names", 0755) == 0);
  write_file("names/with space", "1");
  write_file("names/ünïcødé-日本語", "2");
  write_file("names/new\nline", "3");
  write_file("names/tab\tand\\backslash", "4");
  std::string n255(255, 'n');
  write_file("names/" + n255, "5");
  std::string deep = "names";
  for (int i = 0; i < 15; ++i) {
    deep += "/" + std::string(250, static_cast<char>('a' + i));
    REQUIRE(::mkdir(deep.c_str(), 0755) == 0);
  }
  deep += "/" + n255;
  REQUIRE(deep.size() > 4000);
  write_file(deep, "deep");
  REQUIRE(::symlink(std::string(200, 'x').c_str(), "names/long-target") == 0);
  REQUIRE(::chdir(old) == 0);

  pack_paths(src.path(), {"names"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  REQUIRE(reader->index().lookup_path(deep));
  REQUIRE(format::verify_archive(*reader).ok());
  auto stats = extract_to(*reader, src / "out");
  INFO((stats.ok() ? std::string() : stats.error().to_string()));
  REQUIRE(stats.ok());
  REQUIRE(::chdir(src.path().c_str()) == 0);
  std::string diff = compare_trees("names", "out/names");
  REQUIRE(::chdir(old) == 0);
  CHECK(diff == "");
}

TEST_CASE("pack is deterministic whatever the thread count", "[format]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "d").c_str(), 0755) == 0);
  for (int i = 0; i < 50; ++i) write_file(src / ("d/f" + std::to_string(i)), pattern(20000 + i * 3000, i));
  format::PackConfig one, four;
  one.threads = 1;
  four.threads = 4;
  one.frame_size_bytes = four.frame_size_bytes = 100 * 1024;
  pack_paths(src.path(), {"d"}, work / "1.tar.zst", one);
  pack_paths(src.path(), {"d"}, work / "4.tar.zst", four);
  std::string a = read_file(work / "1.tar.zst"), b = read_file(work / "4.tar.zst");
  CHECK(a.size() > 100000);
  CHECK(a == b);
}

TEST_CASE("several roots, absolute and relative; hot list written first", "[format]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "cache").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "proj").c_str(), 0755) == 0);
  write_file(src / "cache/x", pattern(5000, 3));
  write_file(src / "proj/y", pattern(5000, 4));
  write_file(src / "proj/z", pattern(5000, 5));
  format::PackConfig config;
  config.hot_paths = {"proj/z", "missing/file"};
  pack_paths(src.path(), {src / "cache", "proj"}, work / "a.tar.zst", config);
  auto reader = open_archive(work / "a.tar.zst");
  const auto& idx = reader->index();
  REQUIRE(idx.roots().size() == 2);
  CHECK(idx.roots()[0].original_path == src / "cache");
  CHECK(idx.roots()[0].member_prefix == (src / "cache").substr(1));
  CHECK(idx.roots()[1].original_path == src / "proj");
  CHECK(idx.roots()[1].member_prefix == "proj");
  REQUIRE(idx.hot_list().size() == 1);
  CHECK(idx.path(idx.hot_list()[0]) == "proj/z");
  auto z = idx.entry(*idx.lookup_path("proj/z"));
  auto y = idx.entry(*idx.lookup_path("proj/y"));
  CHECK(z.data_offset < y.data_offset);  // the hot file comes first in the stream
  // Implicit ancestors of the absolute root are directories but not tar members.
  auto tmp = idx.lookup_path("tmp");
  REQUIRE(tmp);
  CHECK(idx.entry(*tmp).implicit_dir);
  REQUIRE(format::verify_archive(*reader).ok());
  // Put the roots back at their original paths (after moving the sources away).
  REQUIRE(::rename((src / "cache").c_str(), (work / "cache-orig").c_str()) == 0);
  REQUIRE(::rename((src / "proj").c_str(), (work / "proj-orig").c_str()) == 0);
  format::ExtractConfig xc;
  xc.targets = format::targets_at_original_paths(idx);
  auto st = format::extract_archive(*reader, xc);
  INFO((st.ok() ? std::string() : st.error().to_string()));
  REQUIRE(st.ok());
  CHECK(compare_trees(work / "cache-orig", src / "cache") == "");
  CHECK(compare_trees(work / "proj-orig", src / "proj") == "");
}

TEST_CASE("pack rejects '..', '.', and overlapping roots", "[format]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "a").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "a/b").c_str(), 0755) == 0);
  auto try_pack = [&](std::vector<std::string> paths) {
    std::vector<format::PackRoot> roots;
    for (auto& p : paths) roots.push_back({p});
    auto sink = LocalFileSink::create(work / "x.tar.zst");
    REQUIRE(sink.ok());
    format::PackConfig config;
    config.warn = [](const std::string&) {};
    return format::write_archive(roots, **sink, config).status();
  };
  CHECK(try_pack({src / "a/../a"}).code() == ErrorCode::kInvalidArgument);
  CHECK(try_pack({"."}).code() == ErrorCode::kInvalidArgument);
  CHECK(try_pack({src / "a", src / "a/b"}).code() == ErrorCode::kInvalidArgument);
  CHECK(try_pack({src / "missing"}).code() == ErrorCode::kNotFound);
  CHECK(::access((work / "x.tar.zst").c_str(), F_OK) != 0);  // nothing half-written
}

TEST_CASE("extract of selected paths only", "[format]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "r/keep").c_str(), 0755) == 0);
  write_file(src / "r/keep/k", "keep");
  write_file(src / "r/drop", "drop");
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  format::ExtractConfig config;
  config.only_paths = {"r/keep"};
  REQUIRE(extract_to(*reader, work / "out", config).ok());
  CHECK(read_file(work / "out/r/keep/k") == "keep");
  CHECK(::access((work / "out/r/drop").c_str(), F_OK) != 0);
  config.only_paths = {"r/nope"};
  CHECK(extract_to(*reader, work / "out2", config).status().code() == ErrorCode::kNotFound);
}
