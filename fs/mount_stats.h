// SPDX-License-Identifier: MIT
// File: fs/mount_stats.h -- MountStats: the figures a mount reports (`lazycache status`,
// `lazycache unmount`), and their machine-readable forms (the human one is in tools/). A plain
// value; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "fs/request_counts.h"

namespace lazycache::fs {

struct MountStats {
  uint64_t archive_bytes = 0;  // size of the archive object
  uint64_t archive_frames = 0;
  uint64_t mount_range_reads = 0;  // reads of the archive made by the mount itself (tail)
  uint64_t store_range_reads = 0;  // range reads for data since the mount
  uint64_t store_bytes = 0;        // bytes fetched from the store for data
  uint64_t frames_from_store = 0;
  uint64_t frames_from_chunk_cache = 0;
  uint64_t frames_from_memory = 0;
  uint64_t prefetched_frames = 0;
  uint64_t fill_target_bytes = 0;  // compressed bytes the fill policy queued for background fill
  uint64_t fill_bytes = 0;         // of store_bytes: fetched by prefetch and background fill
  uint64_t frames_pending = 0;     // frames queued or being fetched now (0: the mount is idle)
  uint64_t on_demand_bytes = 0;    // of store_bytes: fetched for reads and their readahead
  uint64_t chunk_cache_bad = 0;
  uint64_t frames_spilled = 0;              // frames over a quarter of the budget decoded to a file
  uint64_t frames_decoded = 0;              // frame decompressions (a frame read again after eviction counts again)
  uint64_t readahead_stored = 0;            // readahead frames stored in the chunk cache undecoded
  uint64_t frames_decoded_ahead = 0;        // of frames_decoded: fill or prefetch frames decoded for the page cache
  uint64_t decode_ahead_bytes = 0;          // their decompressed bytes (FilesystemConfig::decode_ahead_bytes caps it)
  uint64_t files_to_page_cache = 0;         // files handed to the kernel's page cache whole (notify_store)
  uint64_t frames_to_page_cache = 0;        // frames whose every file was, dropped from memory for it
  uint64_t files_to_page_cache_late = 0;    // of files_to_page_cache: handed off after the frame's decode (note_known)
  uint64_t split_pieces_to_page_cache = 0;  // whole pages of files spanning frames handed off (runs, straddling pages)
  uint64_t fetch_errors = 0;
  uint64_t files_opened = 0;
  uint64_t open_handles = 0;
  uint64_t reads = 0;
  uint64_t bytes_served = 0;
  uint64_t read_errors = 0;
  uint64_t read_timeouts = 0;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_budget_bytes = 0;
  uint64_t memory_peak_bytes = 0;  // the most the budget ever had taken at once
  // The daemon's listing of the tree at mount (fs/tree_warmer.h), summed over its mount points.
  uint64_t warm_entries = 0;      // names listed, so in the kernel's name cache
  uint64_t warm_directories = 0;  // directories listed
  uint64_t warm_ms = 0;           // how long the listing took (so far, while warm_active)
  uint64_t warm_active = 0;       // 1 while a listing runs (it holds a directory of the mount open)
  // Requests the kernel sent, per kind, summed over the daemon's mount points (the FUSE glue's
  // RequestCounts; fields "requests_lookup", "requests_getattr", ...).
  RequestSnapshot requests{};
  double uptime_seconds = 0;

  // "key=value" lines, one per field, in a fixed order (machine-readable state file).
  std::string to_text() const;
  // Parses to_text() output; unknown keys are ignored (newer daemons); a known key whose value
  // is not a decimal number is kCorrupt.
  static Result<MountStats> from_text(const std::string& text);
  // One JSON object (for --json).
  std::string to_json() const;
};

}  // namespace lazycache::fs
