// SPDX-License-Identifier: MIT
// File: fs/frame_cache.h -- FrameCache: decompressed frames of one archive held in memory, least
// recently used first out, charged to a MemoryBudget. Frames are immutable and shared: a reader
// holding a FramePtr keeps the bytes alive after eviction (only the budget charge goes away).
// Thread-safe: one mutex guards the map and the LRU list; no I/O under it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fs/memory_budget.h"

namespace lazycache::fs {

using FramePtr = std::shared_ptr<const std::string>;

class FrameCache {
 public:
  explicit FrameCache(MemoryBudget& budget) : budget_(budget) {}
  ~FrameCache();
  FrameCache(const FrameCache&) = delete;
  FrameCache& operator=(const FrameCache&) = delete;

  // The frame if held (and marks it most recently used), else nullptr.
  FramePtr get(uint32_t frame);
  // Holds `data` for `frame`, evicting older frames to fit the budget. Returns false when the
  // frame does not fit even after evicting everything else (it is then simply not cached).
  bool put(uint32_t frame, FramePtr data);
  // Evicts least recently used frames until `bytes` are free in the budget (or nothing is left).
  void make_room(uint64_t bytes);
  // Drops every frame (readers holding one keep it alive). Returns the bytes released.
  uint64_t clear();
  uint64_t held_bytes() const;
  size_t size() const;

 private:
  bool evict_one_locked();

  MemoryBudget& budget_;
  mutable std::mutex mu_;  // guards lru_, map_, held_
  std::list<uint32_t> lru_;  // front = most recent
  struct Slot {
    FramePtr data;
    std::list<uint32_t>::iterator pos;
  };
  std::unordered_map<uint32_t, Slot> map_;
  uint64_t held_ = 0;
};

}  // namespace lazycache::fs
