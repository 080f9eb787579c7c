// SPDX-License-Identifier: MIT
// File: format/frame_pipeline.h -- FramePipeline: the fetch -> verify+decompress part of
// extract_archive(), and the pure policy that cuts its frame list into range reads.
//
// Design: the frames to read (ascending frame indexes) are cut into parts by plan_fetch_parts():
// runs of adjacent frames, contiguous in the archive, of at most `part_bytes` compressed bytes
// (one frame at least). `concurrency` fetch threads each claim the next part in order and read it
// with one ByteSource::read_at_streaming (one ranged GET for a remote source), so from the first
// byte `concurrency` requests are in flight; the fetch thread checks each frame of its part (size
// and XXH3-128, through format::FrameSource: once, the decoders do not hash again) as soon as its
// bytes are in, and `decoders` threads decompress it while the rest of its part still arrives; the
// consumer take()s frames in list order. Memory: decoders work at most kDecodeAheadPerDecoder x decoders frames ahead of the
// consumer (lowest position first), so the decoded frames in circulation stay few and their
// buffers (format/buffer_pool.h) are recycled: the compressed parts may run far ahead, their
// decoding need not (a decoder is faster than the file writers it feeds); the position the
// consumer waits for is always in the window. A part reserves its compressed bytes when it is
// claimed and a frame gives its share back when it is taken, within parts_budget() of
// `max_inflight_bytes` (one part is always allowed, so a part larger than the budget still goes,
// alone): at most about `max_inflight_bytes` are held in all. Parts are claimed in order and the
// consumer takes in order, so the budget never deadlocks.
// Thread-safe for one consumer; the destructor cancels and joins every thread.
#pragma once

#include "common/byte_buffer.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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
#include "format/archive_head.h"
#include "format/buffer_pool.h"

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

// Pure: the read plan for `compressed_bytes` with `parts_budget_bytes` for the compressed parts in
// flight (the decoded frames have their own bound: see FramePipeline and parts_budget()).
// Explicit values (> 0) are kept. Auto concurrency is 8: the emulated hosted and far links and S3
// give one client more bandwidth up to about 8 streams, and 8 idle-waiting threads cost nothing.
// Auto part size: the parts in flight ((concurrency + 1) of them) fit the budget; capped at 16 MiB
// (S3's guidance for ranged GETs) and at compressed_bytes / (concurrency x kAutoRounds), so that
// an archive is read in at least two waves over every connection and its first bytes are decoded
// and written while the rest is still arriving; ramped up over the first wave (ramp_parts =
// concurrency), so the first frame arrives after a fraction of a part; at least kMinAutoPart.
// Why 4 MiB at least: every request costs the server as well as a round trip: the test Swift
// spends about 16 ms of CPU per GET (node, hosted: 43 reads of 1 MiB took 0.89 s of its CPU,
// 10 reads of 4 MiB 0.33 s, curl's one GET 0.20 s), CPU the file writers need on a small runner.
inline constexpr uint64_t kAutoRounds = 2;
inline constexpr uint64_t kMinAutoPart = 4ull << 20;
FetchPlan choose_fetch_plan(uint64_t compressed_bytes, uint64_t parts_budget_bytes, int concurrency, uint64_t part_bytes);

// The share of a memory budget left for compressed parts once the decoded frames are provided
// for: `decoders` x FramePipeline::kDecodeAheadPerDecoder frames of up to `max_frame_bytes`
// (at least a sixteenth of the budget stays for parts).
uint64_t parts_budget(uint64_t max_inflight_bytes, uint64_t max_frame_bytes, int decoders);
// The largest uncompressed frame of `index` (the decode window's unit).
uint64_t max_frame_bytes(const Index& index);

class FramePipeline {
 public:
  using Frame = std::shared_ptr<const ByteBuffer>;
  // Frames decoded ahead of the consumer per decoder thread (see above).
  static constexpr size_t kDecodeAheadPerDecoder = 2;

  // `head` (optional): the archive's first bytes, read while it was opened (format/archive_head.h);
  // the bytes of a part it covers are copied from there instead of read.
  FramePipeline(const ArchiveReader& reader, std::vector<uint32_t> frames, const FetchPlan& plan, uint64_t max_inflight_bytes, int decoders,
                std::shared_ptr<const ArchiveHead> head = nullptr);
  ~FramePipeline();
  FramePipeline(const FramePipeline&) = delete;
  FramePipeline& operator=(const FramePipeline&) = delete;

  // The decoded frame at position `seq` of the frame list (blocking). Errors: the first failure of
  // any fetch or decode (kCorrupt for a frame that fails its digest, the source's errors), or
  // kCancelled after cancel(). The frame's buffer is recycled once the last reference to it goes.
  Result<Frame> take(size_t seq);
  void cancel();
  uint64_t compressed_read() const { return compressed_read_.load(); }
  // When the first frame and the last part were in and checked (the epoch while none is): the
  // ends of the download in restore's timeline.
  std::chrono::steady_clock::time_point first_part_in() const;
  std::chrono::steady_clock::time_point last_part_in() const;
  size_t part_count() const { return parts_.size(); }
  // Decoded-frame buffers allocated fresh, reused, and the most alive at once; for tests.
  uint64_t frame_buffers_allocated() const { return frame_buffers_->allocated(); }
  uint64_t frame_buffers_reused() const { return frame_buffers_->reused(); }
  uint64_t frame_buffers_peak() const { return frame_buffers_->in_use_peak(); }

 private:
  void fail(Status s);
  void fetch_loop();
  void decode_loop();
  uint64_t frame_cost(size_t seq) const;

  const ArchiveReader& reader_;
  const std::vector<uint32_t> frames_;
  const std::vector<FetchPart> parts_;
  const size_t decode_ahead_;
  const uint64_t max_inflight_;                                     // for compressed parts: parts_budget() of the caller's budget
  const uint64_t largest_part_, largest_frame_;                     // the buffers' capacity (BufferPool::get)
  const std::shared_ptr<BufferPool> part_buffers_, frame_buffers_;  // compressed parts; decoded frames
  const std::shared_ptr<const ArchiveHead> head_;
  std::atomic<uint64_t> compressed_read_{0};
  mutable std::mutex mu_;  // the only lock of the pipeline
  std::condition_variable cv_;
  size_t next_part_ = 0;   // guarded by mu_: next part to claim
  uint64_t inflight_ = 0;  // guarded by mu_: bytes reserved by claimed parts
  // A fetched frame: a view into its part's buffer, which lives until its last frame is decoded.
  struct Fetched {
    size_t seq = 0;
    std::string_view bytes;
    std::shared_ptr<const ByteBuffer> part;
  };
  std::map<size_t, Fetched> todo_;                            // guarded by mu_: fetched frames to decode, by seq
  std::map<size_t, Result<Frame>> done_;                      // guarded by mu_: decoded frames by seq
  size_t next_take_ = 0;                                      // guarded by mu_: the consumer's next position
  std::chrono::steady_clock::time_point first_in_, last_in_;  // guarded by mu_
  Status error_;                                              // guarded by mu_
  std::vector<std::jthread> workers_;                         // last: joined first on destruction
};

}  // namespace lazycache::format
