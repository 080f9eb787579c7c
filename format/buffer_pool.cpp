// SPDX-License-Identifier: MIT
#include "format/buffer_pool.h"

#include <algorithm>

namespace lazycache::format {

std::shared_ptr<BufferPool> BufferPool::create(uint64_t max_free_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_free_bytes));
}

std::shared_ptr<ByteBuffer> BufferPool::get(size_t size, size_t capacity) {
  std::unique_ptr<ByteBuffer> buf;
  {
    std::lock_guard lock(mu_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i]->capacity() >= size && (best == free_.size() || free_[i]->capacity() < free_[best]->capacity())) best = i;
    if (best < free_.size()) {
      buf = std::move(free_[best]);
      free_[best] = std::move(free_.back());
      free_.pop_back();
      free_bytes_ -= buf->capacity();
      ++reused_;
    } else {
      ++allocated_;
    }
    in_use_peak_ = std::max(in_use_peak_, ++in_use_);
  }
  if (!buf) {
    buf = std::make_unique<ByteBuffer>();
    buf->reserve(std::max(size, capacity));
  }
  // Within the capacity: no allocation; new bytes are left uninitialised (common/byte_buffer.h).
  buf->resize(size);
  std::shared_ptr<BufferPool> self = shared_from_this();
  return std::shared_ptr<ByteBuffer>(buf.release(), [self](ByteBuffer* b) { self->put(b); });
}

void BufferPool::put(ByteBuffer* raw) {
  std::unique_ptr<ByteBuffer> buf(raw);
  std::lock_guard lock(mu_);
  --in_use_;
  if (free_bytes_ + buf->capacity() > max_free_bytes_) return;  // freed
  free_bytes_ += buf->capacity();
  free_.push_back(std::move(buf));
}

uint64_t BufferPool::allocated() const {
  std::lock_guard lock(mu_);
  return allocated_;
}

uint64_t BufferPool::reused() const {
  std::lock_guard lock(mu_);
  return reused_;
}

uint64_t BufferPool::in_use_peak() const {
  std::lock_guard lock(mu_);
  return in_use_peak_;
}

}  // namespace lazycache::format
