// SPDX-License-Identifier: MIT
// Format compatibility: the reader reads the committed v1 and v2 golden archives, and today's
// writer produces the same data frames as v2 for the same tree (tests/data/golden/REGENERATE.md).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "archive_test_util.h"
#include "format/verify.h"
#include "golden_tree.h"

using namespace lazycache;
using namespace lazycache::testing;

static const std::string kGoldenDir = std::string(LC_TEST_SOURCE_DIR) + "/tests/data/golden/";
static const std::string kGolden = kGoldenDir + "v2.tar.zst";

TEST_CASE("golden v1 and v2 archives: open, list, read and verify", "[format][golden]") {
  const std::string version = GENERATE(std::string("v1"), std::string("v2"));
  INFO(version);
  auto reader = open_archive(kGoldenDir + version + ".tar.zst");
  const auto& idx = reader->index();
  auto v = format::verify_archive(*reader);
  INFO((v.ok() ? std::string() : v.error().to_string()));
  REQUIRE(v.ok());
  REQUIRE(idx.roots().size() == 1);
  CHECK(idx.roots()[0].member_prefix == "golden");
  auto hello = idx.lookup_path("golden/hello.txt");
  REQUIRE(hello);
  auto e = idx.entry(*hello);
  CHECK(e.nlink == 2);
  CHECK(e.mtime_ns == 1700000000123456789);
  std::string buf(e.size, '\0');
  REQUIRE(reader->read_file(*hello, 0, std::as_writable_bytes(std::span<char>(buf))).ok());
  CHECK(buf == "hello, golden\n");
  auto sym = idx.lookup_path("golden/sub/sym");
  REQUIRE(sym);
  CHECK(idx.entry(*sym).symlink_target == "../hello.txt");
  auto data = idx.lookup_path("golden/sub/data.bin");
  REQUIRE(data);
  std::string d(20000, '\0');
  REQUIRE(reader->read_file(*data, 0, std::as_writable_bytes(std::span<char>(d))).ok());
  CHECK(d == pattern(20000, 7));
  // v2 knows where every member starts; v1 does not.
  CHECK(idx.member_offset(*hello).has_value() == (version == "v2"));
}

TEST_CASE("the writer reproduces the golden data frames byte for byte", "[format][golden]") {
  if (::geteuid() != 0) {
    WARN("skipped: the golden tree was made as root (uid/gid 0)");
    return;
  }
  TempDir src, work;
  make_golden_tree(src.path());
  format::PackConfig config;
  config.frame_size_bytes = 4096;
  config.threads = 2;
  pack_paths(src.path(), {"golden"}, work / "new.tar.zst", config);
  // LC_WRITE_GOLDEN=DIR: write the archive of a format change there (REGENERATE.md).
  if (const char* out = std::getenv("LC_WRITE_GOLDEN")) write_file(std::string(out) + "/new.tar.zst", read_file(work / "new.tar.zst"));
  auto golden = open_archive(kGolden);
  std::string a = read_file(kGolden), b = read_file(work / "new.tar.zst");
  uint64_t data_bytes = golden->index().totals().compressed_bytes;
  REQUIRE(b.size() >= data_bytes);
  // The index differs only by the root's absolute original path; the frames must not differ.
  CHECK(a.substr(0, data_bytes) == b.substr(0, data_bytes));
}
