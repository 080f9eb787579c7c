// SPDX-License-Identifier: MIT
// The pax tar writer/reader and the index lookups.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "archive_test_util.h"
#include "format/tar.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

namespace {

// Reads members from an in-memory tar stream.
struct StreamReader {
  std::string data;
  size_t pos = 0;
  Result<size_t> operator()(std::span<std::byte> out) {
    size_t n = std::min(out.size(), data.size() - pos);
    std::memcpy(out.data(), data.data() + pos, n);
    pos += n;
    return n;
  }
};

}  // namespace

TEST_CASE("tar: members round-trip through the writer and reader, pax only when needed", "[format][tar]") {
  format::TarMember plain;
  plain.path = "dir/file";
  plain.size = 3;
  plain.mtime_ns = 1700000000ll * 1000000000;
  std::string plain_hdr = format::tar_header_bytes(plain);
  CHECK(plain_hdr.size() == 512);  // no pax header for a member that fits ustar

  format::TarMember rich;
  rich.path = std::string(150, 'p') + "/" + std::string(200, 'q');
  rich.type = format::TarType::kSymlink;
  rich.linkname = std::string(300, 't');
  rich.uid = 5000000;
  rich.gid = 3;
  rich.mode = 04755;
  rich.mtime_ns = -1500000001;  // before 1970, with nanoseconds
  rich.xattrs = {{"user.k", std::string("v\0=\n", 4)}};
  std::string stream = plain_hdr + "abc" + std::string(format::tar_padding(3), '\0') + format::tar_header_bytes(rich) +
                       format::tar_end_blocks();

  format::TarReader reader(StreamReader{stream});
  auto m1 = reader.next();
  REQUIRE(m1.ok());
  REQUIRE(m1->has_value());
  CHECK((*m1)->path == "dir/file");
  CHECK((*m1)->size == 3);
  CHECK((*m1)->data_offset == 512);
  CHECK((*m1)->mtime_ns == plain.mtime_ns);
  auto m2 = reader.next();
  REQUIRE(m2.ok());
  REQUIRE(m2->has_value());
  const auto& r = **m2;
  CHECK(r.path == rich.path);
  CHECK(r.linkname == rich.linkname);
  CHECK(r.typeflag == '2');
  CHECK(r.uid == 5000000);
  CHECK(r.mode == 04755);
  CHECK(r.mtime_ns == rich.mtime_ns);
  REQUIRE(r.xattrs.size() == 1);
  CHECK(r.xattrs[0].second == std::string("v\0=\n", 4));
  auto end = reader.next();
  REQUIRE(end.ok());
  CHECK_FALSE(end->has_value());
}

TEST_CASE("tar: bad checksums, numbers and pax records are kCorrupt", "[format][tar]") {
  format::TarMember m;
  m.path = "f";
  std::string h = format::tar_header_bytes(m);
  std::string bad = h;
  bad[0] = 'g';
  CHECK(format::parse_tar_header(std::as_bytes(std::span<const char>(bad))).error().code() == ErrorCode::kCorrupt);
  CHECK_FALSE(format::parse_pax_records("99 path=x\n").ok());
  CHECK_FALSE(format::parse_pax_records("5 a=b\n").ok());
  CHECK_FALSE(format::parse_pax_records("x path=y\n").ok());
  auto ok = format::parse_pax_records("12 path=abc\n");
  REQUIRE(ok.ok());
  CHECK((*ok)[0].second == "abc");
  CHECK(*format::parse_pax_time("1.5") == 1500000000);
  CHECK(*format::parse_pax_time("-1.000000001") == -1000000001);
  CHECK_FALSE(format::parse_pax_time("1.x").ok());
  // A truncated stream ends inside a header: an error, not a crash.
  format::TarReader reader(StreamReader{h.substr(0, 300)});
  CHECK_FALSE(reader.next().ok());
}

TEST_CASE("index: lookups, children, paths, frames_for_range on a packed tree", "[format][index]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "r/d").c_str(), 0755) == 0);
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) names.push_back("n" + std::to_string(i * 37 % 1000));
  for (const auto& n : names) write_file(src / ("r/d/" + n), pattern(1000, n.size()));
  write_file(src / "r/B", "upper");
  write_file(src / "r/a", "lower");
  format::PackConfig config;
  config.frame_size_bytes = 16 * 1024;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", config);
  auto reader = open_archive(work / "a.tar.zst");
  const auto& idx = reader->index();
  auto r = idx.lookup_path("r");
  REQUIRE(r);
  auto ch = idx.children(*r);
  REQUIRE(ch.count == 3);
  CHECK(idx.entry(ch.first).name == "B");  // bytewise: 'B' < 'a' < 'd'
  CHECK(idx.entry(ch.first + 1).name == "a");
  for (const auto& n : names) {
    auto id = idx.lookup_path("r/d/" + n);
    REQUIRE(id);
    CHECK(idx.path(*id) == "r/d/" + n);
    auto e = idx.entry(*id);
    CHECK(e.size == 1000);
    auto [first, last] = idx.frames_for_range(e.data_offset, e.size);
    CHECK(idx.frames()[first].uncompressed_offset <= e.data_offset);
    CHECK(idx.frames()[last].uncompressed_offset + idx.frames()[last].uncompressed_size >= e.data_offset + e.size);
    std::string buf(1000, '\0');
    auto n_read = reader->read_file(*id, 0, std::as_writable_bytes(std::span<char>(buf)));
    REQUIRE(n_read.ok());
    CHECK(buf == pattern(1000, n.size()));
  }
  CHECK_FALSE(idx.lookup_path("r/d/missing"));
  CHECK_FALSE(idx.lookup_path("r/a/below-a-file"));
  CHECK(idx.frames().size() > 10);
  CHECK(idx.totals().file_count == 302);
}

TEST_CASE("tar: an xattr name with a NUL or an empty name is kCorrupt", "[format][tar]") {
  // listxattr(2) separates names by NUL: "user.a\0b" would show as two names.
  for (std::string name : {std::string("user.a\0b", 8), std::string()}) {
    format::TarMember m;
    m.path = "f";
    m.xattrs = {{name, "v"}};
    std::string stream = format::tar_header_bytes(m) + format::tar_end_blocks();
    format::TarReader reader(StreamReader{stream});
    auto r = reader.next();
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == ErrorCode::kCorrupt);
    CHECK_THAT(r.error().message(), Catch::Contains("xattr name"));
  }
}
