// SPDX-License-Identifier: MIT
#include "common/byte_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <utility>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL and the pages fault in
#endif

namespace lazycache {
namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

size_t round_up_to_page(size_t n) { return (n + page_size() - 1) / page_size() * page_size(); }

}  // namespace

void ByteBuffer::reserve(size_t n) {
  if (n <= capacity_) return;
  if (n < kMappedBytes) {
    char* bigger = new char[n];  // default-initialised: not cleared
    if (size_ > 0) std::memcpy(bigger, bytes_, size_);
    release();
    bytes_ = bigger;
    capacity_ = n;
    return;
  }
  const size_t length = round_up_to_page(n);
  void* mapped = MAP_FAILED;
  if (mapped_) {
    // The pages already present move with the mapping: no copy, no new faults for them.
    mapped = ::mremap(bytes_, capacity_, length, MREMAP_MAYMOVE);
    if (mapped != MAP_FAILED) {
      bytes_ = static_cast<char*>(mapped);
      capacity_ = length;
      return;
    }
  }
  mapped = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  char* bigger = static_cast<char*>(mapped);
  size_t present = 0;
  if (size_ > 0) {
    std::memcpy(bigger, bytes_, size_);
    present = size_ / page_size() * page_size();
  }
  release();
  bytes_ = bigger;
  capacity_ = length;
  mapped_ = true;
  populated_ = present;
}

void ByteBuffer::resize(size_t n) {
  reserve(n);
  if (mapped_ && n > populated_) {
    // One call makes the pages about to be written present (see the header). Best effort: on
    // failure (an old kernel, memory pressure) they fault in as they are written.
    const size_t from = populated_ / page_size() * page_size();
    const size_t to = std::min(capacity_, round_up_to_page(n));
    if (::madvise(bytes_ + from, to - from, MADV_POPULATE_WRITE) == 0) populated_ = to;
  }
  size_ = n;
}

void ByteBuffer::swap(ByteBuffer& other) noexcept {
  std::swap(bytes_, other.bytes_);
  std::swap(size_, other.size_);
  std::swap(capacity_, other.capacity_);
  std::swap(populated_, other.populated_);
  std::swap(mapped_, other.mapped_);
}

void ByteBuffer::release() noexcept {
  if (bytes_ != nullptr) {
    if (mapped_) ::munmap(bytes_, capacity_);
    else delete[] bytes_;
  }
  bytes_ = nullptr;
  size_ = capacity_ = populated_ = 0;
  mapped_ = false;
}

}  // namespace lazycache
