// SPDX-License-Identifier: MIT
// File: common/byte_buffer.h -- ByteBuffer: a growable byte buffer whose resize() leaves new
// bytes uninitialised, for buffers that are written whole before they are read (decoded frames,
// fetched parts).
//
// Why not std::string: its resize() clears every new byte, and the decoder or the network
// writes every byte anyway. Profiles put ~5 % of the mount daemon's CPU (a cold read, issue 15)
// and ~8.5 % of a full restore's (memset under the extract pipeline's BufferPool::get) into
// that clearing of fresh 4 MiB buffers; C++20 has no resize_and_overwrite.
// Not thread-safe while written; share it read-only afterwards.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace lazycache {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  // `n` uninitialised bytes.
  explicit ByteBuffer(size_t n) { resize(n); }

  // Room for `n` bytes without a new allocation; keeps the content.
  void reserve(size_t n) {
    if (n <= capacity_) return;
    std::unique_ptr<char[]> bigger(new char[n]);  // default-initialised: not cleared
    if (size_ > 0) std::memcpy(bigger.get(), bytes_.get(), size_);
    bytes_ = std::move(bigger);
    capacity_ = n;
  }
  // Size `n`: the first min(n, size()) bytes kept, any new ones uninitialised.
  void resize(size_t n) {
    reserve(n);
    size_ = n;
  }

  char* data() { return bytes_.get(); }
  const char* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  std::string_view view() const { return std::string_view(bytes_.get(), size_); }

  friend bool operator==(const ByteBuffer& a, std::string_view b) { return a.view() == b; }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace lazycache
