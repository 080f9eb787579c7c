// SPDX-License-Identifier: MIT
// File: format/frame_pipeline.h -- FramePipeline: the fetch -> verify+decompress part of
// extract_archive(), and the pure policy that cuts its frame list into range reads.
//
// Design: the frames to read (ascending frame indexes) are cut into parts by plan_fetch_parts():
// runs of adjacent frames, contiguous in the archive, of at most `part_bytes` compressed bytes
// (one frame at least). `concurrency` fetch threads each claim the next part in order and read it
// with one ByteSource::read_at (one ranged GET for a remote source), so from the first byte
// `concurrency` requests are in flight; `decoders` threads verify (XXH3-128 of the compressed
// bytes) and decompress each frame as soon as its part is in; the consumer take()s frames in list
// order. Memory: a part reserves its compressed plus uncompressed bytes when it is claimed and a
// frame gives its share back when it is taken, so at most about `max_inflight_bytes` are held
// (one part is always allowed, so a part larger than the budget still goes, alone). Parts are
// claimed in order and the consumer takes in order, so the budget never deadlocks.
// Thread-safe for one consumer; the destructor cancels and joins every thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "format/archive.h"

namespace lazycache::format {

// Frames [first, end) of the frame list, read as bytes [offset, offset + length) of the archive.
struct FetchPart {
  size_t first = 0, end = 0;
  uint64_t offset = 0, length = 0;
};

// Pure. `frames` are indexes into `all`, ascending. A part never spans a gap between frames
// (an only_paths selection) and never exceeds part_bytes unless a single frame does.
// With `ramp_parts` > 0, part k < ramp_parts is held to part_bytes * (k + 1) / ramp_parts (one
// frame at least): the first wave of `concurrency` reads, sent together and sharing the link,
// then completes one after another from the smallest, so decoding and writing start after a
// fraction of a part instead of after a whole wave (on a 200 Mbit/s link, 8 x 3.7 MiB arrive
// together after 1.2 s: the writers idled until then).
std::vector<FetchPart> plan_fetch_parts(std::span<const FrameInfo> all, std::span<const uint32_t> frames, uint64_t part_bytes,
                                        size_t ramp_parts = 0);

struct FetchPlan {
  int concurrency = 8;
  uint64_t part_bytes = 16ull << 20;
  size_t ramp_parts = 0;  // see plan_fetch_parts(); auto plans ramp over the first wave
};

// Pure: the read plan for `compressed_bytes` (of frames decoding to `uncompressed_bytes`) under a
// memory budget of `budget_bytes`. Explicit values (> 0) are kept. Auto concurrency is 8: the
// emulated hosted and far links and S3 give one client more bandwidth up to about 8 streams, and
// 8 idle-waiting threads cost nothing. Auto part size: the parts in flight ((concurrency + 1) of
// them, each held compressed and decoded) fit the budget; capped at 16 MiB (S3's guidance for
// ranged GETs) and at compressed_bytes / (concurrency x kAutoRounds), so that an archive is read
// in several waves over every connection and its first bytes are decoded and written while the
// rest is still arriving (node over the far link: 8 x 3.7 MiB parts 2.4-2.8 s, 1 MiB parts
// 1.9-2.1 s), and ramped up over the first wave (ramp_parts = concurrency); at least 1 MiB (a request costs an RTT: smaller parts cost more in round trips
// than they win in overlap).
inline constexpr uint64_t kAutoRounds = 4;
FetchPlan choose_fetch_plan(uint64_t compressed_bytes, uint64_t uncompressed_bytes, uint64_t budget_bytes, int concurrency,
                            uint64_t part_bytes);

class FramePipeline {
 public:
  FramePipeline(const ArchiveReader& reader, std::vector<uint32_t> frames, const FetchPlan& plan, uint64_t max_inflight_bytes,
                int decoders);
  ~FramePipeline();
  FramePipeline(const FramePipeline&) = delete;
  FramePipeline& operator=(const FramePipeline&) = delete;

  // The decoded frame at position `seq` of the frame list (blocking). Errors: the first failure of
  // any fetch or decode (kCorrupt for a frame that fails its digest, the source's errors), or
  // kCancelled after cancel().
  Result<std::string> take(size_t seq);
  void cancel();
  uint64_t compressed_read() const { return compressed_read_.load(); }
  size_t part_count() const { return parts_.size(); }

 private:
  void fail(Status s);
  void fetch_loop();
  void decode_loop();
  uint64_t frame_cost(size_t seq) const;

  const ArchiveReader& reader_;
  const std::vector<uint32_t> frames_;
  const std::vector<FetchPart> parts_;
  const uint64_t max_inflight_;
  std::atomic<uint64_t> compressed_read_{0};
  std::mutex mu_;  // the only lock of the pipeline
  std::condition_variable cv_;
  size_t next_part_ = 0;   // guarded by mu_: next part to claim
  uint64_t inflight_ = 0;  // guarded by mu_: bytes reserved by claimed parts
  // A fetched frame: a view into its part's buffer, which lives until its last frame is decoded.
  struct Fetched {
    size_t seq = 0;
    std::string_view bytes;
    std::shared_ptr<const std::string> part;
  };
  std::deque<Fetched> todo_;                    // guarded by mu_: fetched frames to decode
  std::map<size_t, Result<std::string>> done_;  // guarded by mu_: decoded frames by seq
  Status error_;                                // guarded by mu_
  std::vector<std::jthread> workers_;           // last: joined first on destruction
};

}  // namespace lazycache::format
