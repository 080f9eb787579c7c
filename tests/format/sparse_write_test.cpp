// SPDX-License-Identifier: MIT
// pwrite_sparse(): runs of data chunks written (one pwrite each), all-zero chunks left as holes,
// end_written at the end of the last data written.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "format/sparse_write.h"

using namespace lazycache::format;

namespace {

std::string read_all(int fd, size_t n) {
  std::string out(n, 'x');
  REQUIRE(::pread(fd, out.data(), n, 0) == static_cast<ssize_t>(n));
  return out;
}

}  // namespace

TEST_CASE("pwrite_sparse keeps data runs and holes, at any offset") {
  char tmpl[] = "/tmp/lc-sparse-XXXXXX";
  int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  ::unlink(tmpl);
  const size_t k = kZeroProbeBytes;
  // data, data, zeros, data (short), then a zero tail: two runs and two holes.
  std::string buf(5 * k + 100, '\0');
  for (size_t i = 0; i < 2 * k; ++i) buf[i] = static_cast<char>('a' + i % 26);
  buf[3 * k + 7] = 'z';
  buf[4 * k - 1] = 'y';
  uint64_t end = 0;
  REQUIRE(pwrite_sparse(fd, buf.data(), buf.size(), 0, end, "test").ok());
  CHECK(end == 4 * k);  // the zero tail is a hole: the caller truncates to the size
  REQUIRE(::ftruncate(fd, static_cast<off_t>(buf.size())) == 0);
  CHECK(read_all(fd, buf.size()) == buf);

  // A second piece at an offset (as a split file's writers do), all data: end moves past it.
  std::string piece(k + 3, 'q');
  REQUIRE(pwrite_sparse(fd, piece.data(), piece.size(), buf.size(), end, "test").ok());
  CHECK(end == buf.size() + piece.size());
  CHECK(read_all(fd, buf.size() + piece.size()) == buf + piece);

  // All zeros: nothing written, end unchanged.
  std::string zeros(2 * k, '\0');
  const uint64_t before = end;
  REQUIRE(pwrite_sparse(fd, zeros.data(), zeros.size(), end, end, "test").ok());
  CHECK(end == before);
  ::close(fd);
}

TEST_CASE("pwrite_sparse names the file when the write fails") {
  int fd = ::open("/dev/null", O_RDONLY);
  REQUIRE(fd >= 0);
  std::string data(10, 'a');
  uint64_t end = 0;
  auto s = pwrite_sparse(fd, data.data(), data.size(), 0, end, "some/file");
  ::close(fd);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("some/file") != std::string::npos);
  CHECK(end == 0);
}
