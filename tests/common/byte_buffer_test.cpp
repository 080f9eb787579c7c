// SPDX-License-Identifier: MIT
// ByteBuffer: heap buffers below kMappedBytes, mappings from there on; contents kept across every
// growth (heap to heap, heap to mapping, mapping to a larger mapping), moves that leave the
// source empty, and the mapping's pages present after resize() (RSS grows by the populated size).
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>

#include "common/byte_buffer.h"
#include "common/posix_files.h"

using namespace lazycache;

namespace {

void fill(ByteBuffer& b, size_t from, char seed) {
  for (size_t i = from; i < b.size(); ++i) b.data()[i] = static_cast<char>(seed + i * 7);
}

bool holds(const ByteBuffer& b, size_t n, char seed) {
  for (size_t i = 0; i < n; ++i)
    if (b.data()[i] != static_cast<char>(seed + i * 7)) return false;
  return true;
}

// Resident set size of this process in bytes (/proc/self/statm, second field, in pages).
uint64_t rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

// Whether this kernel populates on request (Linux 5.14+); older ones fault pages in as written.
bool kernel_populates() {
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return false;
  const bool ok = ::madvise(page, 4096, 23 /* MADV_POPULATE_WRITE */) == 0;
  ::munmap(page, 4096);
  return ok;
}

}  // namespace

TEST_CASE("ByteBuffer keeps its bytes across every kind of growth", "[unit]") {
  ByteBuffer b(100);
  CHECK(b.size() == 100);
  CHECK(b.capacity() >= 100);
  fill(b, 0, 'a');
  b.resize(1000);  // heap to heap
  REQUIRE(holds(b, 100, 'a'));
  fill(b, 100, 'a');
  b.resize(ByteBuffer::kMappedBytes + 12345);  // heap to a mapping
  REQUIRE(holds(b, 1000, 'a'));
  fill(b, 1000, 'a');
  const size_t mapped = b.size();
  b.resize(8u << 20);  // a mapping to a larger one (moved with its pages)
  REQUIRE(holds(b, mapped, 'a'));
  fill(b, mapped, 'a');
  REQUIRE(holds(b, b.size(), 'a'));
  b.resize(10);  // shrinking keeps the capacity and the first bytes
  CHECK(b.size() == 10);
  CHECK(b.capacity() >= (8u << 20));
  CHECK(holds(b, 10, 'a'));
  b.resize(8u << 20);  // grows back within its capacity: no new allocation
  CHECK(holds(b, 10, 'a'));
}

TEST_CASE("ByteBuffer moves leave the source empty", "[unit]") {
  ByteBuffer big(1u << 20);
  fill(big, 0, 'x');
  ByteBuffer moved(std::move(big));
  CHECK(big.size() == 0);  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  CHECK(big.data() == nullptr);
  CHECK(holds(moved, moved.size(), 'x'));
  ByteBuffer small(10);
  fill(small, 0, 'y');
  small = std::move(moved);  // the small buffer's bytes are freed, the mapping taken
  CHECK(small.size() == (1u << 20));
  CHECK(holds(small, small.size(), 'x'));
  CHECK(small.view().size() == small.size());
  CHECK(ByteBuffer().view().empty());
}

TEST_CASE("a mapped ByteBuffer's pages are present after resize, and gone when it is freed", "[unit]") {
  constexpr size_t kBytes = 64u << 20;
  const uint64_t before = rss_bytes();
  {
    ByteBuffer b(kBytes);
    // Populated in one call (MADV_POPULATE_WRITE, Linux 5.14+): resident before a byte is written.
    if (kernel_populates()) CHECK(rss_bytes() >= before + kBytes / 2);
    else WARN("this kernel has no MADV_POPULATE_WRITE: pages fault in as they are written");
    fill(b, 0, 'p');
    CHECK(holds(b, b.size(), 'p'));
  }
  CHECK(rss_bytes() < before + kBytes / 2);  // a mapping goes back to the system when freed
}

TEST_CASE("read_whole_file_bytes reads a file whole and refuses one past the limit", "[unit]") {
  char tmpl[] = "/tmp/lc-byte-buffer-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  std::string content(3u << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 31);
  REQUIRE(write_all(fd, content, "write").ok());
  ::close(fd);
  auto got = read_whole_file_bytes(tmpl, content.size());
  REQUIRE(got.ok());
  CHECK(*got == content);
  auto too_big = read_whole_file_bytes(tmpl, content.size() - 1);
  REQUIRE_FALSE(too_big.ok());
  CHECK(too_big.error().code() == ErrorCode::kCorrupt);
  CHECK(too_big.error().message().find(tmpl) != std::string::npos);
  auto missing = read_whole_file_bytes(std::string(tmpl) + ".gone", 10);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find(".gone") != std::string::npos);
  std::remove(tmpl);
}
