// SPDX-License-Identifier: MIT
// File: format/buffer_pool.h -- BufferPool: recycled byte buffers for the extract pipeline's
// fetched parts and decoded frames (format/frame_pipeline.h).
//
// Why: a fresh 4 MiB std::string per decoded frame is zero-filled by the constructor and then
// faulted in page by page (the kernel zeroes each page again): 12 % of all samples of a full
// restore of the node tree went there. A recycled buffer is already resident and is overwritten
// as it is, so a frame costs only its decompression. The buffers are ByteBuffers
// (common/byte_buffer.h), so even a fresh one is not cleared (std::string's resize of a fresh
// buffer still was: 8.5 % of a restore's samples in memset, session 39).
//
// get() hands out a shared_ptr whose deleter puts the buffer back (when the free list holds less
// than `max_free_bytes`; otherwise it is freed): buffers may outlive any user of the pool, the
// pool lives as long as its last buffer. The contents of a buffer from get() are unspecified (the
// bytes of an earlier use). Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/byte_buffer.h"

namespace lazycache::format {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> create(uint64_t max_free_bytes);

  // A buffer of exactly `size` bytes, contents unspecified. Reuses the smallest free buffer whose
  // capacity is enough (no allocation, no zero-fill up to its earlier size). A fresh buffer
  // reserves max(size, `capacity`): pass the largest size the pool will be asked for (frames are
  // cut at member boundaries, so their sizes differ by up to a quarter), or a buffer freed by a
  // slightly smaller frame cannot serve the next one and every such get allocates and faults in
  // a new one. Reserved bytes never written cost no memory (the pages are not touched).
  std::shared_ptr<ByteBuffer> get(size_t size, size_t capacity = 0);

  // Figures for tests: buffers allocated fresh, get() calls served from the free list, and the
  // most buffers handed out and not yet dropped at any one time. allocated() also counts buffers
  // fresh only because every free one was too small, so a bound on buffers alive is in_use_peak().
  uint64_t allocated() const;
  uint64_t reused() const;
  uint64_t in_use_peak() const;

 private:
  explicit BufferPool(uint64_t max_free_bytes) : max_free_bytes_(max_free_bytes) {}
  void put(ByteBuffer* buf);

  const uint64_t max_free_bytes_;
  mutable std::mutex mu_;  // guards everything below
  std::vector<std::unique_ptr<ByteBuffer>> free_;
  uint64_t free_bytes_ = 0;  // capacity of the buffers in free_
  uint64_t allocated_ = 0, reused_ = 0;
  uint64_t in_use_ = 0, in_use_peak_ = 0;  // buffers out of get() whose last reference is alive
};

}  // namespace lazycache::format
