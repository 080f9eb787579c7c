// SPDX-License-Identifier: MIT
// File: fs/read_ahead_policy.h -- ReadAheadPolicy: the pure sequential-access detector behind
// per-open-file readahead. No threads, no clock, no I/O: it turns the stream of reads one open
// file sees into "fetch this byte range of the file ahead of time" (FrameFetcher does the work).
//
// A read that starts within `seek_tolerance_bytes` of where the previous one ended counts as
// sequential (the kernel's own readahead and several reader threads reorder requests a little).
// Each sequential read doubles the window, from `initial_window_bytes` up to `max_window_bytes`;
// any other read resets it. Not thread-safe: one instance per open file, guarded by its owner.
#pragma once

#include <cstdint>

namespace lazycache::fs {

struct ReadAheadConfig {
  // 1 MiB: about one frame at the archive's default frame size, so the first readahead of a
  // file fetches the next frame and nothing more when the reader stops after one block.
  uint64_t initial_window_bytes = 1ull << 20;
  // 32 MiB: several merged 8-16 MiB range reads in flight for one streaming reader, which
  // saturates a fast link, while one reader cannot claim more than a fraction of the budget.
  uint64_t max_window_bytes = 32ull << 20;
  // 512 KiB: the kernel issues up to 128 KiB-1 MiB requests concurrently and out of order.
  uint64_t seek_tolerance_bytes = 512ull << 10;
};

struct FileRange {
  uint64_t offset = 0;
  uint64_t length = 0;  // 0: nothing to fetch
};

class ReadAheadPolicy {
 public:
  explicit ReadAheadPolicy(ReadAheadConfig config = {}) : config_(config), window_(config.initial_window_bytes) {}

  // Records a read of [offset, offset+length) of a file of `file_size` bytes and returns the
  // range to fetch ahead (never overlapping what an earlier call already returned while the
  // access stayed sequential, never past file_size).
  FileRange on_read(uint64_t offset, uint64_t length, uint64_t file_size);

  uint64_t window_bytes() const { return window_; }

 private:
  ReadAheadConfig config_;
  uint64_t window_;
  uint64_t next_expected_ = 0;    // end of the previous read
  uint64_t requested_until_ = 0;  // readahead already asked for [.., requested_until_)
  bool first_ = true;
};

}  // namespace lazycache::fs
