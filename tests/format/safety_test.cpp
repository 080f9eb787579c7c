// SPDX-License-Identifier: MIT
// Extraction safety and hostile archives: nothing is written outside the target, every bad
// byte is kCorrupt (never a crash), and failures leave no half-written file behind.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "archive_test_util.h"
#include "format/index_builder.h"
#include "format/seek_table.h"
#include "format/verify.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

TEST_CASE("escaping symlinks are created as saved; --no-external-symlinks refuses them before writing", "[format][safety]") {
  for (std::string target : {"/etc/passwd", "../../outside", "a/../../.."}) {
    TempDir src, work;
    REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
    write_file(src / "r/file", "data");
    REQUIRE(::symlink(target.c_str(), (src / "r/evil").c_str()) == 0);
    pack_paths(src.path(), {"r"}, work / "a.tar.zst");
    auto reader = open_archive(work / "a.tar.zst");
    // Default, like tar: created as a symlink (and never followed).
    REQUIRE(extract_to(*reader, work / "out").ok());
    char buf[256];
    ssize_t n = ::readlink((work / "out/r/evil").c_str(), buf, sizeof buf);
    REQUIRE(n > 0);
    CHECK(std::string(buf, static_cast<size_t>(n)) == target);
    // Refused on request, naming the entry, with nothing written (out2 did not exist).
    format::ExtractConfig refuse;
    refuse.external_symlinks = format::ExtractConfig::ExternalSymlinks::kRefuse;
    auto st = extract_to(*reader, work / "out2", refuse);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code() == ErrorCode::kPermissionDenied);
    CHECK_THAT(st.error().message(), Catch::Contains("r/evil"));
    CHECK(::access((work / "out2").c_str(), F_OK) != 0);
  }
}

TEST_CASE("a symlink already at the destination is never followed", "[format][safety]") {
  TempDir src, work, outside;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  REQUIRE(::mkdir((src / "r/d").c_str(), 0755) == 0);
  write_file(src / "r/d/f", "archive data");
  write_file(src / "r/victim", "archive victim");
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");

  // Directory position taken by a symlink to somewhere else: refused, outside untouched.
  REQUIRE(::mkdir((work / "out").c_str(), 0755) == 0);
  REQUIRE(::mkdir((work / "out/r").c_str(), 0755) == 0);
  REQUIRE(::symlink(outside.path().c_str(), (work / "out/r/d").c_str()) == 0);
  auto st = extract_to(*reader, work / "out");
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.error().message(), Catch::Contains("r/d"));
  CHECK(::access((outside / "f").c_str(), F_OK) != 0);

  // File position taken by a symlink: replaced by the file, the symlink's target untouched.
  write_file(outside / "target", "precious");
  TempDir out2;
  REQUIRE(::mkdir((out2 / "r").c_str(), 0755) == 0);
  REQUIRE(::symlink((outside / "target").c_str(), (out2 / "r/victim").c_str()) == 0);
  REQUIRE(extract_to(*reader, out2.path()).ok());
  CHECK(read_file(outside / "target") == "precious");
  CHECK(read_file(out2 / "r/victim") == "archive victim");
  struct stat sb;
  REQUIRE(::lstat((out2 / "r/victim").c_str(), &sb) == 0);
  CHECK(S_ISREG(sb.st_mode));
}

TEST_CASE("index names with '..', '/', or empty are corrupt", "[format][safety]") {
  for (const std::string& bad : std::vector<std::string>{"..", ".", "a/b", "", std::string("nul\0x", 5)}) {
    format::IndexModel m;
    m.nodes.resize(2);
    m.nodes[0].children = {1};
    m.nodes[1].name = bad;
    m.nodes[1].parent = 0;
    m.nodes[1].link_group = 1;
    m.nodes[1].type = format::EntryType::kDirectory;
    auto raw = format::serialize_index(m);
    REQUIRE(raw.ok());
    auto idx = format::Index::parse(*raw);
    REQUIRE_FALSE(idx.ok());
    CHECK(idx.error().code() == ErrorCode::kCorrupt);
  }
}

TEST_CASE("a corrupted data frame fails extract with kCorrupt and leaves no half-written file", "[format][safety]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  write_file(src / "r/big", pattern(600 * 1024, 9));
  format::PackConfig config;
  config.frame_size_bytes = 64 * 1024;
  pack_paths(src.path(), {"r"}, work / "a.tar.zst", config);
  std::string bytes = read_file(work / "a.tar.zst");
  {
    auto reader = open_archive(work / "a.tar.zst");
    auto f = reader->index().frames()[3];
    bytes[f.compressed_offset + f.compressed_size / 2] ^= 0x40;
  }
  write_file(work / "bad.tar.zst", bytes);
  auto reader = open_archive(work / "bad.tar.zst");  // the tail is intact
  auto st = extract_to(*reader, work / "out");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code() == ErrorCode::kCorrupt);
  CHECK_THAT(st.error().message(), Catch::Contains("frame 3"));
  // Nothing under a final name, no temporary: the target this extract made is gone again.
  CHECK(::access((work / "out").c_str(), F_OK) != 0);
  auto v = format::verify_archive(*reader);
  REQUIRE_FALSE(v.ok());
  CHECK(v.error().code() == ErrorCode::kCorrupt);
}

TEST_CASE("damaged tails never crash: every byte flip and truncation gives an error", "[format][safety]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "r").c_str(), 0755) == 0);
  for (int i = 0; i < 20; ++i) write_file(src / ("r/f" + std::to_string(i)), pattern(3000, i));
  REQUIRE(::symlink("f1", (src / "r/l").c_str()) == 0);
  pack_paths(src.path(), {"r"}, work / "a.tar.zst");
  const std::string good = read_file(work / "a.tar.zst");
  auto reader = open_archive(work / "a.tar.zst");
  uint64_t data_end = reader->index().totals().compressed_bytes;
  std::mt19937 rng(42);
  // A flip may pass unnoticed only where it changes nothing the reader uses: zstd's compressed
  // index has slack bits (header window bits, entropy-table encodings) that decode to the same
  // bytes, which the index checksum then verifies; and the seek-table descriptor's two unused
  // low bits. Any other flip must be refused at open or by verifying the frames.
  const size_t seek_table_begin = good.size() - (8 + (reader->index().frames().size() + 1) * 12 + 9);
  const size_t descriptor_pos = good.size() - 5;
  auto index_bytes_of = [&](const std::string& archive) {
    auto frame = std::as_bytes(std::span(archive)).subspan(data_end, seek_table_begin - data_end);
    auto raw = format::unwrap_index_frame(frame);
    return raw.ok() ? std::string(raw->view()) : std::string("<error>");
  };
  const std::string good_index = index_bytes_of(good);
  // Every byte of the tail (index frame + seek table), flipped one at a time.
  for (size_t pos = data_end; pos < good.size(); ++pos) {
    std::string bad = good;
    bad[pos] ^= static_cast<char>(1 << (rng() % 8));
    auto r = format::ArchiveReader::open(std::make_shared<MemorySource>(bad));
    if (!r.ok()) {
      CHECK((r.error().code() == ErrorCode::kCorrupt || r.error().code() == ErrorCode::kUnsupported));
      continue;
    }
    // Opened: the flip may sit in what only frame decoding reads (a data frame's seek-table
    // checksum), so verifying every frame must catch it, or it was truly unnoticed.
    auto v = format::verify_archive(**r);
    if (!v.ok()) {
      CHECK(v.error().code() == ErrorCode::kCorrupt);
      continue;
    }
    INFO("a flipped bit at byte " << pos << " of " << good.size() << " was not noticed");
    if (pos < seek_table_begin) CHECK(index_bytes_of(bad) == good_index);  // decodes to the same index
    else CHECK(pos == descriptor_pos);
  }
  for (size_t cut = 1; cut < good.size(); cut += 97) {
    auto r = format::ArchiveReader::open(std::make_shared<MemorySource>(good.substr(0, good.size() - cut)));
    CHECK_FALSE(r.ok());
  }
  CHECK_FALSE(format::ArchiveReader::open(std::make_shared<MemorySource>(std::string())).ok());
}

TEST_CASE("seek table: parse validates magic, reserved bits, sizes and object size", "[format]") {
  std::vector<format::SeekEntry> frames{{0, 100, 0, 1000, 7}, {0, 50, 0, 0, 9}};
  std::string table = format::SeekTable::serialize(frames);
  std::string object = std::string(150, 'x') + table;
  auto bytes = [](const std::string& s) { return std::as_bytes(std::span<const char>(s)); };
  auto st = format::SeekTable::parse(bytes(object), object.size());
  REQUIRE(st.ok());
  REQUIRE(st->frames().size() == 2);
  CHECK(st->frames()[1].compressed_offset == 100);
  CHECK(st->frames()[0].xxh64_low32 == 7);
  CHECK(st->uncompressed_bytes() == 1000);
  // Object size that does not add up.
  CHECK(format::SeekTable::parse(bytes(object), object.size() + 1).error().code() == ErrorCode::kCorrupt);
  std::string reserved = object;
  reserved[reserved.size() - 5] = static_cast<char>(0x84);
  CHECK(format::SeekTable::parse(bytes(reserved), reserved.size()).error().code() == ErrorCode::kCorrupt);
  std::string no_checksum = object;
  no_checksum[no_checksum.size() - 5] = 0;
  CHECK(format::SeekTable::parse(bytes(no_checksum), no_checksum.size()).error().code() == ErrorCode::kUnsupported);
  std::string huge_n = object;
  huge_n[huge_n.size() - 6] = static_cast<char>(0x7f);  // N's top byte
  CHECK_FALSE(format::SeekTable::parse(bytes(huge_n), huge_n.size()).ok());
  std::string big_frame = std::string(150, 'x') +
                          format::SeekTable::serialize(std::vector<format::SeekEntry>{{0, 100, 0, (1u << 30) + 1, 0}, {0, 50, 0, 0, 0}});
  CHECK(format::SeekTable::parse(bytes(big_frame), big_frame.size()).error().code() == ErrorCode::kCorrupt);
}
