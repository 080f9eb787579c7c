// SPDX-License-Identifier: MIT
// File: fs/page_cache_gate.h -- PageCacheGate: which inodes of a writable mount may still be
// given archive bytes for the kernel's page cache, and the cut-off before their content changes.
//
// Why: a writable mount hands decoded archive files to the kernel's page cache as a read-only
// mount does (fs/filesystem.h, add_page_cache_sink), but a file's content may change (a write
// after copy-up, a truncate). A hand-off that lands after such a change would put the archive's
// old bytes back under the new ones. So an operation that is about to change an inode's content
// first cuts it off: no hand-off of that inode starts afterwards, and cut_off() returns only once
// the hand-offs already in flight for it have ended (the kernel holds the pages from then on, and
// those are the bytes the copy-up puts in upper/: identical). Writes then keep the kernel's pages
// up to date themselves (the mount has no writeback cache).
//
// Deadlock rule: cut_off() waits for a notify_store, which may wait for a page the kernel locked
// for a READ of the same file. So it must be called with no lock the read path takes (the
// overlay's mutex): the overlay calls it before it locks.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace lazycache::fs {

class PageCacheGate {
 public:
  // A hand-off of `ino` may start: false when it was cut off. On true, end() must follow.
  bool begin(uint64_t ino);
  void end(uint64_t ino);
  // From now on begin(ino) is false; returns when no hand-off of `ino` is in flight.
  void cut_off(uint64_t ino);
  // From now on begin(ino) is false, without waiting: for an inode whose bytes now come from
  // upper/ but are still the archive's (a copy-up), so a hand-off in flight is still right.
  // Safe under any lock.
  void mark(uint64_t ino);
  bool is_cut_off(uint64_t ino) const;

 private:
  mutable std::mutex mu_;
  std::condition_variable ended_;
  std::unordered_set<uint64_t> cut_;
  std::unordered_map<uint64_t, uint32_t> in_flight_;
};

}  // namespace lazycache::fs
