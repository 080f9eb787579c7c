// SPDX-License-Identifier: MIT
#include "fs/frame_cache.h"

namespace lazycache::fs {

FrameCache::~FrameCache() { budget_.release(held_); }

FramePtr FrameCache::get(uint32_t frame) {
  std::lock_guard lock(mu_);
  auto it = map_.find(frame);
  if (it == map_.end()) return nullptr;
  Slot& slot = it->second;
  if (slot.ahead) {  // read at last: an ordinary frame from now on
    lru_.splice(lru_.begin(), ahead_lru_, slot.pos);
    slot.ahead = false;
    ahead_held_ -= slot.data->size();
  } else {
    lru_.splice(lru_.begin(), lru_, slot.pos);
  }
  return slot.data;
}

bool FrameCache::contains(uint32_t frame) const {
  std::lock_guard lock(mu_);
  return map_.count(frame) != 0;
}

FramePtr FrameCache::peek(uint32_t frame) const {
  std::lock_guard lock(mu_);
  auto it = map_.find(frame);
  return it == map_.end() ? nullptr : it->second.data;
}

bool FrameCache::evict_one_locked() {
  std::list<uint32_t>& from = lru_.empty() ? ahead_lru_ : lru_;  // frames about to be read go last
  if (from.empty()) return false;
  erase_locked(map_.find(from.back()));
  return true;
}

void FrameCache::erase_locked(Map::iterator it) {
  const uint64_t n = it->second.data->size();
  held_ -= n;
  if (it->second.ahead) ahead_held_ -= n;
  budget_.release(n);
  (it->second.ahead ? ahead_lru_ : lru_).erase(it->second.pos);
  map_.erase(it);
}

void FrameCache::hand_to_kernel(uint32_t frame) {
  std::lock_guard lock(mu_);
  handed_.insert(frame);
  if (auto it = map_.find(frame); it != map_.end()) erase_locked(it);
}

bool FrameCache::drop(uint32_t frame) {
  std::lock_guard lock(mu_);
  auto it = map_.find(frame);
  if (it == map_.end()) return false;
  erase_locked(it);
  return true;
}

bool FrameCache::kernel_holds(uint32_t frame) const {
  std::lock_guard lock(mu_);
  return handed_.count(frame) != 0;
}

bool FrameCache::put(uint32_t frame, FramePtr data, bool ahead) {
  std::lock_guard lock(mu_);
  if (map_.count(frame) != 0) return true;
  const uint64_t n = data->size();
  while (!budget_.try_reserve(n)) {
    if (!evict_one_locked()) return false;
  }
  std::list<uint32_t>& into = ahead ? ahead_lru_ : lru_;
  into.push_front(frame);
  map_.emplace(frame, Slot{std::move(data), into.begin(), ahead});
  held_ += n;
  if (ahead) ahead_held_ += n;
  return true;
}

void FrameCache::make_room(uint64_t bytes) {
  std::lock_guard lock(mu_);
  while (budget_.used() + bytes > budget_.limit() && held_ > budget_.limit() / 4) {
    if (!evict_one_locked()) return;
  }
}

uint64_t FrameCache::clear() {
  std::lock_guard lock(mu_);
  const uint64_t before = held_;
  while (evict_one_locked()) {}
  return before - held_;
}

uint64_t FrameCache::held_bytes() const {
  std::lock_guard lock(mu_);
  return held_;
}

uint64_t FrameCache::ahead_bytes() const {
  std::lock_guard lock(mu_);
  return ahead_held_;
}

size_t FrameCache::size() const {
  std::lock_guard lock(mu_);
  return map_.size();
}

}  // namespace lazycache::fs
