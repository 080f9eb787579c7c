// SPDX-License-Identifier: MIT
// File: fs/frame_spill.h -- FrameSpill: decompressed frames too large for the memory budget,
// held in local files instead (issue 13).
//
// A legal archive may have frames of up to 512 MiB (`pack --frame-size 512M`). Held in memory,
// such a frame takes more than the budget, so the FrameCache cannot keep it, and every 128 KiB
// read decompressed it again. Instead a frame larger than a quarter of the budget is decoded
// once, streaming (format::FrameDecoder), into an unnamed temporary file (O_TMPFILE: nothing
// is left behind by a crash), and reads copy their slice out of it with pread: the page cache
// holds what is hot, and the heap holds one slice per read.
//
// Bound: at most `max_frames` files (the most recently used; 4 by default, so readers of a few
// large files at once are not refetching each other's frames). A dropped file lives on until
// the last reader holding it lets go. Thread-safe: one mutex around the map; no I/O under it.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "common/status.h"
#include "fs/frame_cache.h"

namespace lazycache::fs {

// One decompressed frame in a local file. Immutable once published.
class SpilledFrame {
 public:
  // An empty file in `dir` (unnamed where the filesystem can, else created and unlinked at once).
  // Errors: kIo, kPermissionDenied, kResourceExhausted (ENOSPC).
  static Result<std::shared_ptr<SpilledFrame>> create(const std::string& dir);
  ~SpilledFrame();
  SpilledFrame(const SpilledFrame&) = delete;
  SpilledFrame& operator=(const SpilledFrame&) = delete;

  // Appends bytes (while the frame is being decoded).
  Status append(std::span<const std::byte> bytes);
  uint64_t size() const { return size_; }
  // Bytes [offset, offset + length) of the frame, copied into a buffer of their own.
  // Errors: kIo; kCorrupt when the file is shorter than the range (it was written in full).
  Result<FramePtr> read(uint64_t offset, size_t length) const;

 private:
  explicit SpilledFrame(int fd) : fd_(fd) {}
  int fd_;
  uint64_t size_ = 0;
};
using SpilledFramePtr = std::shared_ptr<const SpilledFrame>;

class FrameSpill {
 public:
  FrameSpill(std::string dir, size_t max_frames = 4) : dir_(std::move(dir)), max_frames_(max_frames) {}
  const std::string& dir() const { return dir_; }

  // The frame if held (and marks it most recently used), else nullptr.
  SpilledFramePtr get(uint32_t frame);
  // Holds `spilled` for `frame`, dropping the least recently used beyond max_frames.
  void put(uint32_t frame, SpilledFramePtr spilled);
  size_t size() const;

 private:
  const std::string dir_;
  const size_t max_frames_;
  mutable std::mutex mu_;    // guards lru_, map_
  std::list<uint32_t> lru_;  // front = most recent
  std::map<uint32_t, std::pair<SpilledFramePtr, std::list<uint32_t>::iterator>> map_;
};

}  // namespace lazycache::fs
