// SPDX-License-Identifier: MIT
// File: fs/frame_buffers.h -- FrameBuffers: decodes verified frames into recycled buffers.
//
// Why (issue 15, profile of the node first run): ~16 % of the daemon's CPU went to zero-filling
// and page-faulting a fresh 4 MiB buffer for every decode (format::decode_frame_checked builds a
// std::string(n, 0), and the daemon's large buffers come from mmap, so each one is new pages the
// kernel clears and the string clears again). Here a buffer whose last holder let go returns to a
// small free list and the next decode writes over it: no fill, no faults. A fresh buffer reserves
// a quarter more than asked (frames end at a member boundary, up to 1.25x the target size), so
// one buffer fits the next frame; untouched pages of the reserve cost no memory.
//
// Checks: the compressed bytes must have the index's size and XXH3-128 digest (what the packer
// wrote), zstd must decompress them to exactly the frame's size, and the result must match the
// seek table's XXH64 checksum (the checks of format::decode_frame_checked, whose output it cannot
// take: it allocates its own string).
//
// Bound: at most `max_kept` free buffers of at most `max_buffer_bytes` each stay (2: a frame being
// decoded while the previous one is still being replied from); trim() frees them (idle mount).
// Thread-safe; buffers may be released from any thread, also after the FrameBuffers is gone.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "format/archive.h"
#include "fs/frame_cache.h"

namespace lazycache::fs {

class FrameBuffers {
 public:
  explicit FrameBuffers(size_t max_kept = 2, uint64_t max_buffer_bytes = 8ull << 20);

  // Frame `number` (described by `info`) from its compressed bytes. Errors: kCorrupt (message
  // names the frame and the failed check), kInternal (no zstd context).
  Result<FramePtr> decode(const format::FrameInfo& info, uint32_t number, std::span<const std::byte> compressed);
  // Frees the free buffers; returns their capacity in bytes.
  uint64_t trim();
  uint64_t kept_bytes() const;
  // Decodes that wrote over a recycled buffer (figures for tests).
  uint64_t reused() const;

 private:
  struct Pool;
  std::shared_ptr<Pool> pool_;  // shared with the deleters of the buffers handed out
};

}  // namespace lazycache::fs
