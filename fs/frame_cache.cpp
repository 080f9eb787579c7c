// SPDX-License-Identifier: MIT
#include "fs/frame_cache.h"

namespace lazycache::fs {

FrameCache::~FrameCache() { budget_.release(held_); }

FramePtr FrameCache::get(uint32_t frame) {
  std::lock_guard lock(mu_);
  auto it = map_.find(frame);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.pos);
  return it->second.data;
}

bool FrameCache::evict_one_locked() {
  if (lru_.empty()) return false;
  auto it = map_.find(lru_.back());
  held_ -= it->second.data->size();
  budget_.release(it->second.data->size());
  map_.erase(it);
  lru_.pop_back();
  return true;
}

bool FrameCache::put(uint32_t frame, FramePtr data) {
  std::lock_guard lock(mu_);
  if (map_.count(frame) != 0) return true;
  const uint64_t n = data->size();
  while (!budget_.try_reserve(n)) {
    if (!evict_one_locked()) return false;
  }
  lru_.push_front(frame);
  map_.emplace(frame, Slot{std::move(data), lru_.begin()});
  held_ += n;
  return true;
}

void FrameCache::make_room(uint64_t bytes) {
  std::lock_guard lock(mu_);
  while (budget_.used() + bytes > budget_.limit()) {
    if (!evict_one_locked()) return;
  }
}

uint64_t FrameCache::clear() {
  std::lock_guard lock(mu_);
  const uint64_t before = held_;
  while (evict_one_locked()) {
  }
  return before - held_;
}

uint64_t FrameCache::held_bytes() const {
  std::lock_guard lock(mu_);
  return held_;
}

size_t FrameCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace lazycache::fs
