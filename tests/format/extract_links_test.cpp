// SPDX-License-Identifier: MIT
// Extraction's promises about links, temporaries, xattrs and failures (issues 13 and 16): a
// refusal that claims to catch escaping symlinks resolves chains; temporaries of a killed
// extract are swept and never packed; a failed extract removes what it created; security.* and
// trusted.* xattrs are restored only on request; where PATHs put the roots.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "archive_test_util.h"
#include "format/fs_util.h"
#include "format/index_builder.h"
#include "format/root_placement.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;
using Policy = format::ExtractConfig::ExternalSymlinks;

namespace {

// A PID that is certainly not running: a child that has exited and been reaped.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("--no-external-symlinks resolves chains through the archive's own symlinks", "[format][safety]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "r/d").c_str(), 0755) == 0);
  write_file(src / "r/d/f", "data");
  // r/d/up -> .. is r; r/d/in -> up/d/f stays inside; esc -> up/../.. is above the target,
  // although its text climbs only as far as r/d is deep (the old count passed it).
  REQUIRE(::symlink("..", (src / "r/d/up").c_str()) == 0);
  REQUIRE(::symlink("up/d/f", (src / "r/d/in").c_str()) == 0);
  pack_paths(src.path(), {"r"}, work / "inside.tar.zst");
  REQUIRE(::symlink("up/../..", (src / "r/d/esc").c_str()) == 0);
  pack_paths(src.path(), {"r"}, work / "chain.tar.zst");
  format::ExtractConfig refuse;
  refuse.external_symlinks = Policy::kRefuse;
  {
    auto reader = open_archive(work / "inside.tar.zst");
    auto st = extract_to(*reader, work / "in", refuse);
    INFO((st.ok() ? std::string() : st.error().to_string()));
    CHECK(st.ok());
  }
  auto reader = open_archive(work / "chain.tar.zst");
  auto st = extract_to(*reader, work / "out", refuse);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code() == ErrorCode::kPermissionDenied);
  CHECK_THAT(st.error().message(), Catch::Contains("r/d/esc"));
  CHECK_FALSE(exists(work / "out"));
  // A loop is refused too (never resolves), not followed forever.
  REQUIRE(::unlink((src / "r/d/esc").c_str()) == 0);
  REQUIRE(::symlink("loop", (src / "r/d/loop").c_str()) == 0);
  pack_paths(src.path(), {"r"}, work / "loop.tar.zst");
  auto looped = extract_to(*open_archive(work / "loop.tar.zst"), work / "loop", refuse);
  CHECK_FALSE(looped.ok());
}

TEST_CASE("temporaries of a killed extract are removed by the next one, never packed", "[format][safety]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "r/sub").c_str(), 0755) == 0);
  write_file(src / "r/sub/f", "data");
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  REQUIRE(extract_to(*reader, work / "out").ok());
  // What a kill -9 in the middle of the named-temporary path leaves, in the target and below.
  const std::string dead = ".lazycache-tmp." + std::to_string(dead_pid()) + ".7";
  const std::string live = ".lazycache-tmp.1.7";  // PID 1 is alive: maybe an extract at work
  write_file(work / ("out/" + dead), std::string(4096, 'p'));
  write_file(work / ("out/r/sub/" + dead), std::string(4096, 'p'));
  write_file(work / ("out/r/sub/" + live), "in progress");
  write_file(work / "out/r/sub/.lazycache-tmp.x.7", "not ours");
  auto st = extract_to(*reader, work / "out");
  REQUIRE(st.ok());
  CHECK(st->stale_temporaries == 2);
  CHECK_FALSE(exists(work / ("out/" + dead)));
  CHECK_FALSE(exists(work / ("out/r/sub/" + dead)));
  CHECK(exists(work / ("out/r/sub/" + live)));
  CHECK(exists(work / "out/r/sub/.lazycache-tmp.x.7"));
  // A pack of the tree skips what has exactly that form (with a warning), keeps the rest.
  std::vector<std::string> warnings;
  format::PackConfig pc;
  pc.warn = [&](const std::string& w) { warnings.push_back(w); };
  auto stats = pack_paths(work / "out", {"r"}, work / "b.tar.zst", pc);
  CHECK(stats.skipped == 1);
  auto repacked = open_archive(work / "b.tar.zst");
  CHECK_FALSE(repacked->index().lookup_path("r/sub/" + live));
  CHECK(repacked->index().lookup_path("r/sub/.lazycache-tmp.x.7"));
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("interrupted extract"));
}

TEST_CASE("both ways of writing files give the same tree and leave no temporary", "[format][safety]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  write_file(src / "r/a", "alpha", 0640);
  write_file(src / "r/b", pattern(200 * 1024, 5), 0755);
  write_file(src / "r/empty", "");
  REQUIRE(::link((src / "r/a").c_str(), (src / "r/hard").c_str()) == 0);
  REQUIRE(::symlink("a", (src / "r/l").c_str()) == 0);
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  for (bool unnamed : {true, false}) {
    INFO("unnamed temporaries: " << unnamed);
    format::ExtractConfig config;
    config.unnamed_temporaries = unnamed;
    const std::string out = work / (unnamed ? "u" : "n");
    for (int pass = 0; pass < 2; ++pass) {  // into nothing, then over the result
      REQUIRE(extract_to(*reader, out, config).ok());
      CHECK(compare_trees(src / "r", out + "/r") == "");
      CHECK(std::system(("test -z \"$(find '" + out + "' -name '.lazycache-tmp.*')\"").c_str()) == 0);
    }
  }
}

TEST_CASE("extract temporary names: exactly .lazycache-tmp.PID.N", "[format][safety]") {
  CHECK(format::extract_temporary_name(5).rfind(".lazycache-tmp." + std::to_string(::getpid()) + ".5", 0) == 0);
  CHECK(format::extract_temporary_pid(".lazycache-tmp.123.4") == 123);
  CHECK(format::extract_temporary_pid(".lazycache-tmp.123.4.x") == 0);
  CHECK(format::extract_temporary_pid(".lazycache-tmp.0.4") == 0);
  CHECK(format::extract_temporary_pid(".lazycache-tmp.12") == 0);
  CHECK(format::extract_temporary_pid("lazycache-tmp.1.2") == 0);
}

TEST_CASE("a failed extract removes the names it created and keeps what was there", "[format][safety]") {
  const bool unnamed = GENERATE(true, false);  // O_TMPFILE, and the named-temporary fallback
  INFO("unnamed temporaries: " << unnamed);
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "r/new").c_str(), 0755) == 0);
  write_file(src / "r/a", "small file first");
  write_file(src / "r/new/n", "small");
  write_file(src / "r/zbig", pattern(600 * 1024, 3));
  REQUIRE(::symlink("/usr/bin/python3", (src / "r/py").c_str()) == 0);
  format::PackConfig config;
  config.frame_size_bytes = 64 * 1024;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", config);
  std::string bytes = read_file(work / "a.tar.zst");
  {
    auto reader = open_archive(work / "a.tar.zst");
    const auto& idx = reader->index();
    auto big = idx.entry(*idx.lookup_path("r/zbig"));
    auto f = idx.frames()[idx.frames_for_range(big.data_offset + big.size - 1, 1).first];  // its last frame
    bytes[f.compressed_offset + f.compressed_size / 2] ^= 0x40;
  }
  write_file(work / "bad.tar.zst", bytes);
  auto reader = open_archive(work / "bad.tar.zst");
  // Into an existing directory that already holds r/ with a user's file and an older r/a.
  REQUIRE(::mkdir((work / "out").c_str(), 0755) == 0);
  REQUIRE(::mkdir((work / "out/r").c_str(), 0755) == 0);
  write_file(work / "out/r/mine", "the user's");
  write_file(work / "out/r/a", "older a");
  format::ExtractConfig xc;
  xc.unnamed_temporaries = unnamed;
  auto st = extract_to(*reader, work / "out", xc);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code() == ErrorCode::kCorrupt);
  CHECK(read_file(work / "out/r/mine") == "the user's");
  CHECK(exists(work / "out/r/a"));  // replaced (like tar), never removed
  CHECK_FALSE(exists(work / "out/r/new"));
  CHECK_FALSE(exists(work / "out/r/zbig"));
  CHECK_FALSE(exists(work / "out/r/py"));
  CHECK(std::system(("test \"$(ls -A '" + work.path() + "/out/r')\" = \"$(printf 'a\\nmine')\"").c_str()) == 0);
}

TEST_CASE("security.* and trusted.* xattrs are restored only when included", "[format][safety]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  write_file(src / "r/f", "data");
  const std::string f = src / "r/f";
  if (::geteuid() != 0 || ::setxattr(f.c_str(), "trusted.lc", "t", 1, 0) != 0 || ::setxattr(f.c_str(), "user.lc", "u", 1, 0) != 0) {
    WARN("needs root and a filesystem with trusted.* and user.* xattrs: skipped");
    return;
  }
  format::PackConfig pc;
  pc.xattrs = format::XattrSet::kStored;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", pc);
  auto reader = open_archive(work / "a.tar.zst");
  char v[8];
  REQUIRE(extract_to(*reader, work / "out").ok());
  CHECK(::getxattr((work / "out/r/f").c_str(), "user.lc", v, sizeof v) == 1);
  CHECK(::getxattr((work / "out/r/f").c_str(), "trusted.lc", v, sizeof v) < 0);
  format::ExtractConfig include;
  include.xattrs_include = {"trusted.*"};
  REQUIRE(extract_to(*reader, work / "out2", include).ok());
  CHECK(::getxattr((work / "out2/r/f").c_str(), "trusted.lc", v, sizeof v) == 1);
}

TEST_CASE("an xattr name with a NUL is refused when packing", "[format][safety]") {
  format::IndexModel model;
  format::IndexNode top;
  top.type = format::EntryType::kDirectory;
  model.nodes.push_back(top);
  format::IndexNode file;
  file.name = "f";
  file.type = format::EntryType::kRegular;
  file.xattrs.push_back(format::Xattr{std::string("user.a\0b", 8), "v"});
  model.nodes.push_back(file);
  model.nodes[0].children.push_back(1);
  model.nodes[1].parent = 0;
  model.nodes[1].link_group = 1;
  model.roots.push_back(format::IndexRootSpec{"/x/f", "f", 1});
  auto raw = format::serialize_index(model);
  REQUIRE_FALSE(raw.ok());
  CHECK_THAT(raw.error().message(), Catch::Contains("NUL"));
}

TEST_CASE("PATHs map to roots as mount maps them", "[format]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "a").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "b").c_str(), 0755) == 0);
  pack_paths(src.path(), {"a", "b"}, work / "two.tar.zst");
  auto reader = open_archive(work / "two.tar.zst");
  const auto& idx = reader->index();
  const std::string a = src / "a", b = src / "b";
  auto none = format::place_roots(idx, {});
  REQUIRE(none.ok());
  REQUIRE(none->size() == 2);
  CHECK((*none)[0].path == a);
  auto one = format::place_roots(idx, {b});  // a saved path: that root only
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].root == idx.roots()[1].entry);
  auto moved = format::place_roots(idx, {"/elsewhere/x", "/elsewhere/y"});  // as many as saved: by position
  REQUIRE(moved.ok());
  CHECK((*moved)[1].path == "/elsewhere/y");
  CHECK((*moved)[1].root == idx.roots()[1].entry);
  auto bad = format::place_roots(idx, {"/elsewhere/x"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(bad.error().message(), Catch::Contains(a));
}
