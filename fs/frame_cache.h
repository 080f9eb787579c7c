// SPDX-License-Identifier: MIT
// File: fs/frame_cache.h -- FrameCache: decompressed frames of one archive held in memory, least
// recently used first out, charged to a MemoryBudget. Frames are immutable and shared: a reader
// holding a FramePtr keeps the bytes alive after eviction (only the budget charge goes away).
// Frames put "ahead" (decoded by readahead, not read yet) are evicted only after every other
// frame: they are the ones the job is about to read (issue 15: with a small budget, readahead
// that evicted its own frames before their reader came made the job decode them twice). The
// first get() makes such a frame an ordinary one; ahead_bytes() says how much is held ahead.
// A frame whose files all went to the kernel's page cache (Filesystem's page-cache hand-off) is
// dropped at once and remembered as held by the kernel, so readahead does not decode it again.
// Thread-safe: one mutex guards the map and the LRU list; no I/O under it.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "fs/frame_bytes.h"
#include "fs/memory_budget.h"

namespace lazycache::fs {

class FrameCache {
 public:
  explicit FrameCache(MemoryBudget& budget) : budget_(budget) {}
  ~FrameCache();
  FrameCache(const FrameCache&) = delete;
  FrameCache& operator=(const FrameCache&) = delete;

  // The frame if held (and marks it most recently used, and no longer ahead), else nullptr.
  FramePtr get(uint32_t frame);
  // Whether the frame is held; changes nothing.
  bool contains(uint32_t frame) const;
  // The frame if held, else nullptr; changes nothing (the late page-cache hand-off, which is no
  // read of it).
  FramePtr peek(uint32_t frame) const;
  // Holds `data` for `frame`, evicting older frames to fit the budget (ordinary ones first).
  // Returns false when the frame does not fit even after evicting everything else (it is then
  // simply not cached). `ahead`: decoded before anyone read it (see above).
  bool put(uint32_t frame, FramePtr data, bool ahead = false);
  // Evicts least recently used frames until `bytes` are free in the budget, but keeps the most
  // recent quarter of the budget: buffers in flight (reads whose chunk-cache writes are still
  // under way) must not evict the frames the job is reading, which it would decode again.
  void make_room(uint64_t bytes);
  // Drops every frame (readers holding one keep it alive). Returns the bytes released.
  uint64_t clear();
  // Drops `frame`, whose bytes the kernel's page cache now holds, and remembers that: reads of
  // its files no longer reach the mount, so it is not worth memory (issue 15: 64 MiB). A later
  // get() misses (the kernel may drop pages; such a read decodes the frame again).
  void hand_to_kernel(uint32_t frame);
  // Whether hand_to_kernel() was called for `frame` (readahead skips such frames).
  bool kernel_holds(uint32_t frame) const;
  // Drops `frame` if held (a reader streamed past it). Returns whether it was held.
  bool drop(uint32_t frame);
  uint64_t held_bytes() const;
  uint64_t ahead_bytes() const;
  size_t size() const;

 private:
  struct Slot {
    FramePtr data;
    std::list<uint32_t>::iterator pos;  // in ahead_lru_ when `ahead`, else in lru_
    bool ahead = false;
  };
  using Map = std::unordered_map<uint32_t, Slot>;
  bool evict_one_locked();
  void erase_locked(Map::iterator it);  // `it` must be valid

  MemoryBudget& budget_;
  mutable std::mutex mu_;          // guards lru_, ahead_lru_, map_, handed_, held_, ahead_held_
  std::list<uint32_t> lru_;        // ordinary frames, front = most recent
  std::list<uint32_t> ahead_lru_;  // frames put ahead and not read yet, front = most recent
  Map map_;
  std::unordered_set<uint32_t> handed_;  // frames handed to the kernel's page cache
  uint64_t held_ = 0, ahead_held_ = 0;
};

}  // namespace lazycache::fs
