// SPDX-License-Identifier: MIT
// File: fs/archive_read_ahead.h -- ArchiveReadAhead: readahead across files, on the archive's
// frame sequence. No threads, no clock, no I/O (FrameFetcher does the work).
//
// Why: per-file readahead (read_ahead_policy.h) cannot help a job that reads many small files:
// each file is a few KiB inside one frame, so every cold frame costs the reader a full store
// round trip, one after the other. But the archive stores a tree depth-first with children in
// name order, so a job that walks a directory, loads a package or reads files in name order
// moves forward through the frames. When on-demand reads advance frame by frame, the next
// frames are fetched ahead, concurrently, while the job is still reading the current one.
//
// Detection: up to `streams` cursors (several readers, or a job interleaving two areas). A read
// of frames [first, last] continues a cursor when `first` lies between the cursor's frame and
// `gap_frames` past the last frame it asked for (frames fetched ahead may be read from the
// kernel's page cache, never reaching the mount: the next read comes after them). Reads inside
// the cursor's current frame only keep it alive; moving to a later frame doubles its window
// (from `initial_frames` up to `max_frames`) and asks for the frames after `last` up to the
// window that no earlier call asked for. A read that continues no cursor replaces the least
// recently used one and asks for nothing: one jump is not a pattern, and fetching after every
// random read would overfetch.
// Not thread-safe: the owner serialises calls.
#pragma once

#include <cstdint>
#include <vector>

namespace lazycache::fs {

struct ArchiveReadAheadConfig {
  // 2 frames: the first advance fetches a little (~1-2 MiB compressed at the default frame size).
  uint32_t initial_frames = 2;
  // 16 frames: ~8-16 MiB compressed ahead, several range reads in flight, within a fraction
  // of the memory budget once decompressed (readahead frames stay in memory).
  uint32_t max_frames = 16;
  uint32_t streams = 4;
  // A job that reads every few files skips frames now and then: still forward.
  uint32_t gap_frames = 2;
};

struct FrameSpan {
  uint32_t first = 0;
  uint32_t count = 0;  // 0: nothing to fetch
};

class ArchiveReadAhead {
 public:
  explicit ArchiveReadAhead(ArchiveReadAheadConfig config = {}) : config_(config) {}

  // Records an on-demand read of frames [first, last] of an archive of `frame_count` frames and
  // returns the frames to fetch ahead (never past the end; never frames an earlier call on the
  // same cursor returned).
  FrameSpan on_read(uint32_t first, uint32_t last, uint32_t frame_count);

 private:
  struct Cursor {
    uint32_t frame = 0;            // the last frame read through this cursor
    uint32_t requested_until = 0;  // frames up to this one were already asked for
    uint32_t window = 0;
    uint64_t last_used = 0;
  };
  ArchiveReadAheadConfig config_;
  std::vector<Cursor> cursors_;
  uint64_t tick_ = 0;
};

}  // namespace lazycache::fs
