// SPDX-License-Identifier: MIT
// File: common/byte_buffer.h -- ByteBuffer: a growable byte buffer whose resize() leaves new
// bytes uninitialised, for buffers that are written whole before they are read (decoded frames,
// fetched parts, chunk-cache blobs, the decompressed index).
//
// Why not std::string: its resize() clears every new byte, and the decoder or the network
// writes every byte anyway. Profiles put ~5 % of the mount daemon's CPU (a cold read, issue 15)
// and ~8.5 % of a full restore's (memset under the extract pipeline's BufferPool::get) into
// that clearing of fresh 4 MiB buffers; C++20 has no resize_and_overwrite.
//
// Large buffers (kMappedBytes and up) are their own anonymous mapping, whose pages resize()
// asks the kernel to populate in one call (MADV_POPULATE_WRITE) before the bytes are written.
// Why: a fresh 4 MiB buffer is 1,024 page faults when the decoder writes it, and a fault costs
// 1-15 us depending on the machine (15 us on the bench's VM: 15 ms per 4 MiB frame, more than
// its decompression); populated in one call the same pages cost ~1 us each. A mapping also goes
// back to the system when freed, whatever malloc's thresholds. Where the kernel lacks
// MADV_POPULATE_WRITE (before 5.14) the pages fault in as they are written, as before.
// Not thread-safe while written; share it read-only afterwards.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace lazycache {

class ByteBuffer {
 public:
  // From this capacity on a buffer is its own mapping (see above).
  static constexpr size_t kMappedBytes = 256 << 10;

  ByteBuffer() = default;
  // `n` uninitialised bytes.
  explicit ByteBuffer(size_t n) { resize(n); }
  ByteBuffer(ByteBuffer&& other) noexcept { swap(other); }
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    ByteBuffer gone(std::move(*this));
    swap(other);
    return *this;
  }
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;
  ~ByteBuffer() { release(); }

  // Room for `n` bytes without a new allocation; keeps the content.
  void reserve(size_t n);
  // Size `n`: the first min(n, size()) bytes kept, any new ones uninitialised.
  void resize(size_t n);

  char* data() { return bytes_; }
  const char* data() const { return bytes_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  std::string_view view() const { return std::string_view(bytes_, size_); }

  friend bool operator==(const ByteBuffer& a, std::string_view b) { return a.view() == b; }

 private:
  void swap(ByteBuffer& other) noexcept;
  void release() noexcept;

  char* bytes_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  size_t populated_ = 0;  // a mapping's bytes already made present (resize() populates the rest)
  bool mapped_ = false;   // bytes_ is a mapping of capacity_ bytes, else new char[capacity_]
};

}  // namespace lazycache
