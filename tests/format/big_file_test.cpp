// SPDX-License-Identifier: MIT
// A file larger than 4 GiB (sparse source): frame splitting, u64 offsets, and a sparse extract.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_test_util.h"
#include "format/verify.h"
#include "tree_util.h"

using namespace lazycache;
using namespace lazycache::testing;

TEST_CASE("round trip of a file larger than 4 GiB", "[format][slow]") {
  TempDir src, work;
  REQUIRE(::mkdir((src / "big").c_str(), 0755) == 0);
  const uint64_t size = (4ull << 30) + 12345;
  int fd = ::open((src / "big/sparse").c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
  const std::string marks[3] = {"start", "middle", "end-of-file"};
  const uint64_t at[3] = {0, (1ull << 32) - 3, size - marks[2].size()};  // one straddles 4 GiB
  for (int i = 0; i < 3; ++i)
    REQUIRE(::pwrite(fd, marks[i].data(), marks[i].size(), static_cast<off_t>(at[i])) == static_cast<ssize_t>(marks[i].size()));
  ::close(fd);
  write_file(src / "big/after", "after the big one");
  format::PackConfig config;
  config.frame_size_bytes = 64ull << 20;  // fewer frames: the test is about sizes, not counts
  auto stats = pack_paths(src.path(), {"big"}, work / "a.tar.zst", config);
  CHECK(stats.file_bytes == size + 17);
  auto reader = open_archive(work / "a.tar.zst");
  const auto& idx = reader->index();
  auto e = idx.entry(*idx.lookup_path("big/sparse"));
  CHECK(e.size == size);
  auto [first, last] = idx.frames_for_range(e.data_offset, e.size);
  CHECK(last - first + 1 >= 64);  // split across many frames (4 GiB / 64 MiB)
  for (const auto& f : idx.frames()) CHECK(f.uncompressed_size <= config.frame_size_bytes + config.frame_size_bytes / 4 + 4096);
  std::string mid(6, '\0');
  REQUIRE(reader->read_file(e.id, at[1], std::as_writable_bytes(std::span<char>(mid))).ok());
  CHECK(mid == "middle");
  auto x = extract_to(*reader, work / "out");
  INFO((x.ok() ? std::string() : x.error().to_string()));
  REQUIRE(x.ok());
  struct stat st;
  REQUIRE(::stat((work / "out/big/sparse").c_str(), &st) == 0);
  CHECK(static_cast<uint64_t>(st.st_size) == size);
  CHECK(static_cast<uint64_t>(st.st_blocks) * 512 < (64ull << 20));  // written sparse
  int in = ::open((work / "out/big/sparse").c_str(), O_RDONLY);
  for (int i = 0; i < 3; ++i) {
    std::string buf(marks[i].size(), '\0');
    REQUIRE(::pread(in, buf.data(), buf.size(), static_cast<off_t>(at[i])) == static_cast<ssize_t>(buf.size()));
    CHECK(buf == marks[i]);
  }
  ::close(in);
  CHECK(read_file(work / "out/big/after") == "after the big one");
}
