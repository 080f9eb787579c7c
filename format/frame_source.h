// SPDX-License-Identifier: MIT
// File: format/frame_source.h -- FrameSource: the compressed bytes of archive frames, verified,
// from a local cache when it holds them, else from the archive's ByteSource; and FrameDataCache,
// the small cache interface it reads through (as mountpoint-s3's DataCache).
//
// Design: "chunk cache, else a merged range read, then verify the digest" is this one component.
// Its users: fs/frame_fetcher.cpp (the mount: FrameDataCache = fs::ChunkCache),
// tools/incremental_save.cpp (base frames of an incremental save: the mount's ChunkCache, if it
// exists) and format/frame_pipeline.cpp (extract and restore: no_frame_cache()). The range read is
// the ByteSource the archive was opened over (common/byte_source.h): format/ knows nothing of the
// object store behind it, nor of fs/'s cache behind FrameDataCache (tests/layering_test.sh).
// Scheduling (which frames, when, how many reads in flight), decoding and storing in the cache
// stay with the callers: a FrameSource only fetches and checks.
//
// The rule, the same for every user: bytes are handed out only after FrameSource itself checked
// them against the seek table (size, XXH3-128 digest), whether they came from the cache or the
// source, and every failure to get a frame's true bytes is one of two kinds:
//  - kCorrupt: a short read (the source ended before the frame did) or a digest mismatch. Why
//    kCorrupt and not kUnavailable for a short read: ByteSource::read_at is short only at the end
//    of the object (a remote source turns a short body inside the object into kUnavailable after
//    its own retries, remote/object_byte_source.cpp), so a short read here means the archive is
//    shorter than its seek table says; asking again returns the same bytes. Bytes damaged on the
//    way (a digest mismatch) are also kCorrupt: the caller may refetch a bounded number of times
//    (fs::FrameFetcher does), but never retries them as if the store were down.
//  - the source's own error (kUnavailable, kTimeout, kPreconditionFailed, kIo, ...), unchanged
//    in code, with context naming the frames and the source.
// A cached copy that cannot be used (the cache's get() fails with anything but kNotFound, or its
// bytes fail the check) is never an error: it is reported to `on_bad_copy` and treated as a
// miss, so the frame is read from the source. Cost of checking: one XXH3-128 pass over the
// compressed bytes (tens of GB/s per core), small against the decompression that follows.
//
// Thread-safe when the cache and the source are (both interfaces require it); holds no state of
// its own beyond references, so it is cheap to make one per call.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/byte_buffer.h"
#include "common/byte_source.h"
#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

// A local cache of compressed frames keyed by their XXH3-128 digest. Implementations must be
// thread-safe. fs::ChunkCache is the persistent one; no_frame_cache() holds nothing.
class FrameDataCache {
 public:
  virtual ~FrameDataCache() = default;
  // The bytes stored under `digest`. kNotFound on a miss; any other error means the cache had a
  // copy it could not return (FrameSource treats it as a miss and reports it to on_bad_copy).
  virtual Result<ByteBuffer> get(const Digest128& digest) = 0;
  // Stores `bytes`, which the caller has checked hash to `digest`. Best effort: the cache reports
  // its own failures (FrameSource::store ignores the status).
  virtual Status put(const Digest128& digest, std::span<const std::byte> bytes) = 0;
};

// The cache of a reader without one (extract, restore): every get() is kNotFound, put() does
// nothing. Stateless; one shared instance.
FrameDataCache& no_frame_cache();

// The outcome of one range read of the source.
struct RangeRead {
  uint64_t bytes_read = 0;  // what the source returned (also when short); 0 on a failed read
  Status status;            // the read's error (with context), kCorrupt when short, else OK
  // read_run() only: per frame of the run (first..last), OK or why its bytes are not the frame
  // (`status` when the read failed, kCorrupt for a digest mismatch).
  std::vector<Status> frames;
};

// What fetch() took from where.
struct FetchCounts {
  uint32_t from_cache = 0, from_source = 0;
  uint32_t range_reads = 0;  // ranges the misses were merged into
  uint64_t source_bytes = 0;
};

// Pure: `frames` (ascending frame numbers) cut into runs [begin, end) of positions whose frames
// are adjacent in number and back to back in the archive: each run is one range read.
std::vector<std::pair<size_t, size_t>> contiguous_runs(std::span<const FrameInfo> all, std::span<const uint32_t> frames);

class FrameSource {
 public:
  using BadCopyHook = std::function<void(uint32_t frame, const Status& why)>;
  // Told by read_run() of each frame of its run that is in and passed check(): once per frame,
  // in frame order, as soon as its last byte came: during the read (on the reading thread, so
  // keep it short) or, for a source that does not stream, after it.
  using FrameReady = std::function<void(uint32_t frame)>;

  // `source` is the archive, `frames` its seek table (Index::frames()); both and `cache` must
  // outlive the FrameSource. `on_bad_copy` (optional) hears of every unusable cached copy.
  FrameSource(const ByteSource& source, std::span<const FrameInfo> frames, FrameDataCache& cache, BadCopyHook on_bad_copy = {});

  // OK, or kCorrupt naming the frame and the failed check (size, XXH3-128 digest).
  Status check(uint32_t frame, std::span<const std::byte> bytes) const;
  // Frame `frame`'s bytes from the cache, checked. kNotFound on a miss and for a bad copy (after
  // on_bad_copy). Never reads the source.
  Result<ByteBuffer> cached(uint32_t frame) const;
  // Stores checked bytes of `frame` in the cache; best effort (see FrameDataCache::put).
  void store(uint32_t frame, std::span<const std::byte> bytes) const;

  // Bytes [offset, offset + out.size()) of the archive with one read_at (read_at_streaming when
  // `progress` is set). `what` names them in messages ("frames 3-5"). kCorrupt when the source
  // returns fewer bytes (see the rule above).
  RangeRead read_range(uint64_t offset, std::span<std::byte> out, const std::string& what, const ReadProgress& progress = {}) const;
  // Frames first..last, back to back in the archive (else kInvalidArgument), into `out` (exactly
  // their bytes) with one read_at, then each checked: RangeRead::frames says which are good.
  // `prefilled`: the first bytes of `out` already hold the archive's bytes (its head, read
  // earlier: format/archive_head.h); only the rest is read.
  // With `ready`, the read streams (ByteSource::read_at_streaming) and each frame is checked and
  // handed to `ready` as soon as its bytes are in, so that the caller can decode it while the rest
  // of the run arrives; its bytes in `out` are not written again. A frame checked before the read
  // failed keeps its own status in RangeRead::frames (the frames after it: the read's error).
  RangeRead read_run(uint32_t first, uint32_t last, std::span<std::byte> out, uint64_t prefilled = 0, const FrameReady& ready = {}) const;
  // Frames first..last into `out` (exactly the bytes from the first frame's start to the last
  // one's end), each at its offset from the first: from the cache when it holds a good copy, the
  // misses merged into one range per contiguous run and read in one read_ranges call (concurrent
  // for a remote source). Errors: the first failure in frame order (see the rule above).
  Result<FetchCounts> fetch(uint32_t first, uint32_t last, std::span<std::byte> out) const;

  // Bytes from frame `first`'s start to frame `last`'s end.
  uint64_t span_bytes(uint32_t first, uint32_t last) const;
  const ByteSource& source() const { return source_; }

 private:
  std::string frames_label(uint32_t first, uint32_t last) const;

  const ByteSource& source_;
  const std::span<const FrameInfo> frames_;
  FrameDataCache& cache_;
  const BadCopyHook on_bad_copy_;
};

}  // namespace lazycache::format
