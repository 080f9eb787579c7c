// SPDX-License-Identifier: MIT
// File: fs/frame_bytes.h -- FrameBytes: the buffer a decompressed frame (or a slice of one) lives
// in, and FramePtr, the shared handle readers, the in-memory cache and the page-cache hand-off
// hold it by.
//
// Why not std::string: its resize() clears every new byte, and the decoder writes every byte
// anyway. A profile of the cold read through the mount put ~5 % of the daemon's CPU into that
// clearing of fresh 4 MiB buffers (issue 15); C++20 has no resize_and_overwrite. Here resize()
// leaves new bytes uninitialised: whoever grows a buffer writes all of it before anyone reads
// (FrameBuffers decodes into it; spill and upper-file reads pread into it and shrink to what
// they got).
// Not thread-safe while written; shared read-only (FramePtr is a pointer to const) afterwards.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace lazycache::fs {

class FrameBytes {
 public:
  FrameBytes() = default;
  // `n` uninitialised bytes.
  explicit FrameBytes(size_t n) { resize(n); }

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

  friend bool operator==(const FrameBytes& a, std::string_view b) { return a.view() == b; }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t size_ = 0, capacity_ = 0;
};

using FramePtr = std::shared_ptr<const FrameBytes>;

}  // namespace lazycache::fs
