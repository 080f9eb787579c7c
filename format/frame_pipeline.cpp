// SPDX-License-Identifier: MIT
#include "format/frame_pipeline.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "format/frame_codec.h"
#include "format/frame_source.h"

namespace lazycache::format {

namespace {
// Reads of a part whose frames fail their digest (fs/frame_fetcher.cpp makes three as well).
constexpr int kCorruptFrameAttempts = 3;
}  // namespace

uint64_t max_frame_bytes(const Index& index) {
  uint64_t m = 0;
  for (const FrameInfo& f : index.frames()) m = std::max<uint64_t>(m, f.uncompressed_size);
  return m;
}

std::vector<FetchPart> plan_fetch_parts(std::span<const FrameInfo> all, std::span<const uint32_t> frames, uint64_t part_bytes,
                                        size_t ramp_parts) {
  std::vector<FetchPart> parts;
  // The size part k may reach: ramped over the first ramp_parts parts, then part_bytes.
  auto limit = [&](size_t k) { return k < ramp_parts ? std::max<uint64_t>(1, part_bytes / ramp_parts * (k + 1)) : part_bytes; };
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameInfo& f = all[frames[i]];
    if (!parts.empty()) {
      FetchPart& p = parts.back();
      const bool adjacent = frames[i] == frames[i - 1] + 1 && f.compressed_offset == p.offset + p.length;
      if (adjacent && p.length + f.compressed_size <= limit(parts.size() - 1)) {
        p.length += f.compressed_size;
        p.end = i + 1;
        continue;
      }
    }
    parts.push_back(FetchPart{i, i + 1, f.compressed_offset, f.compressed_size});
  }
  return parts;
}

FetchPlan choose_fetch_plan(uint64_t compressed_bytes, uint64_t parts_budget_bytes, int concurrency, uint64_t part_bytes) {
  constexpr uint64_t kMaxAutoPart = 16ull << 20;
  FetchPlan plan;
  plan.concurrency = concurrency > 0 ? concurrency : 8;
  if (part_bytes > 0) {
    plan.part_bytes = part_bytes;
    return plan;
  }
  const auto slots = static_cast<uint64_t>(plan.concurrency) + 1;
  const uint64_t by_budget = parts_budget_bytes / slots;
  const uint64_t reads = static_cast<uint64_t>(plan.concurrency) * kAutoRounds;
  const uint64_t by_spread = (compressed_bytes + reads - 1) / reads;
  plan.part_bytes = std::clamp(std::min(by_budget, by_spread), kMinAutoPart, kMaxAutoPart);
  plan.ramp_parts = static_cast<size_t>(plan.concurrency);
  return plan;
}

uint64_t parts_budget(uint64_t max_inflight_bytes, uint64_t max_frame_bytes, int decoders) {
  const uint64_t window = FramePipeline::kDecodeAheadPerDecoder * static_cast<uint64_t>(std::max(1, decoders)) * max_frame_bytes;
  return std::max(max_inflight_bytes / 16, max_inflight_bytes > window ? max_inflight_bytes - window : 0);
}

FramePipeline::FramePipeline(const ArchiveReader& reader, std::vector<uint32_t> frames, const FetchPlan& plan, uint64_t max_inflight_bytes,
                             int decoders, std::shared_ptr<const ArchiveHead> head)
    : reader_(reader), frames_(std::move(frames)),
      parts_(plan_fetch_parts(reader.index().frames(), frames_, plan.part_bytes, plan.ramp_parts)),
      decode_ahead_(kDecodeAheadPerDecoder * static_cast<size_t>(std::max(1, decoders))),
      max_inflight_(parts_budget(max_inflight_bytes, max_frame_bytes(reader.index()), decoders)),
      largest_part_(
          std::accumulate(parts_.begin(), parts_.end(), uint64_t{0}, [](uint64_t m, const FetchPart& p) { return std::max(m, p.length); })),
      largest_frame_(max_frame_bytes(reader.index())),
      // Free buffers kept: what the budget lets be in flight anyway.
      part_buffers_(BufferPool::create(max_inflight_bytes)), frame_buffers_(BufferPool::create(max_inflight_bytes)),
      head_(std::move(head)) {
  const int fetchers = static_cast<int>(
      std::min<size_t>(static_cast<size_t>(std::max(1, plan.concurrency)), std::max<size_t>(1, parts_.size())));
  for (int i = 0; i < fetchers; ++i) workers_.emplace_back([this] { fetch_loop(); });
  for (int i = 0; i < std::max(1, decoders); ++i) workers_.emplace_back([this] { decode_loop(); });
}

FramePipeline::~FramePipeline() {
  cancel();
  workers_.clear();  // joins
}

// What a claimed part reserves per frame: its compressed bytes (decoded frames are bounded by the
// decode window instead).
uint64_t FramePipeline::frame_cost(size_t seq) const { return reader_.index().frames()[frames_[seq]].compressed_size; }

Result<FramePipeline::Frame> FramePipeline::take(size_t seq) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_.count(seq) || !error_.ok(); });
  if (!error_.ok()) return error_;
  Result<Frame> r = std::move(done_.at(seq));
  done_.erase(seq);
  next_take_ = seq + 1;
  inflight_ -= frame_cost(seq);
  cv_.notify_all();
  return r;
}

std::chrono::steady_clock::time_point FramePipeline::first_part_in() const {
  std::lock_guard lock(mu_);
  return first_in_;
}

std::chrono::steady_clock::time_point FramePipeline::last_part_in() const {
  std::lock_guard lock(mu_);
  return last_in_;
}

void FramePipeline::cancel() {
  std::lock_guard lock(mu_);
  if (error_.ok()) error_ = Status(ErrorCode::kCancelled, "extraction stopped");
  cv_.notify_all();
}

void FramePipeline::fail(Status s) {
  std::lock_guard lock(mu_);
  if (error_.ok()) error_ = std::move(s);
  cv_.notify_all();
}

void FramePipeline::fetch_loop() {
  auto part_cost = [&](const FetchPart& p) {
    uint64_t need = 0;
    for (size_t k = p.first; k < p.end; ++k) need += frame_cost(k);
    return need;
  };
  for (;;) {
    size_t pi = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return !error_.ok() || next_part_ >= parts_.size() || inflight_ == 0 || inflight_ + part_cost(parts_[next_part_]) <= max_inflight_;
      });
      if (!error_.ok() || next_part_ >= parts_.size()) return;
      pi = next_part_++;
      inflight_ += part_cost(parts_[pi]);
    }
    const FetchPart& part = parts_[pi];
    // Read and checked by the one frame source (format/frame_source.h); extract has no cache.
    const FrameSource source(reader_.source(), reader_.index().frames(), no_frame_cache());
    // Each frame goes to the decoders as soon as it is in and checked, while the rest of the part
    // still arrives (FrameSource::read_run's `ready`, on this thread): a part's last frames no
    // longer wait for its first ones, and the work after the last byte shrinks to the last frame's.
    std::vector<char> handed(part.end - part.first, 0);
    std::shared_ptr<ByteBuffer> buf;  // the attempt's buffer; handed frames keep theirs alive
    auto hand = [&](uint32_t frame) {
      const size_t k = part.first + (frame - frames_[part.first]);  // a part's frames are consecutive
      if (handed[k - part.first]) return;                           // an earlier attempt handed it
      handed[k - part.first] = 1;
      const FrameInfo& info = reader_.index().frames()[frame];
      // An aliasing view of the part's buffer: one allocation per part, no copy per frame.
      Fetched f{k, std::string_view(buf->data() + (info.compressed_offset - part.offset), info.compressed_size), buf};
      std::lock_guard lock(mu_);
      if (first_in_.time_since_epoch().count() == 0) first_in_ = std::chrono::steady_clock::now();
      todo_.emplace(k, std::move(f));
      cv_.notify_all();
    };
    auto attempt = [&](bool use_head) {
      // A fresh buffer per attempt: the decoders may be reading the frames an earlier one handed.
      buf = part_buffers_->get(part.length, largest_part_);
      const auto out = std::as_writable_bytes(std::span<char>(buf->data(), buf->size()));
      uint64_t covered = 0;  // bytes of the part the head holds
      if (use_head && head_ && part.offset < head_->length()) {
        covered = std::min<uint64_t>(part.length, head_->length() - part.offset);
        // A head piece that failed (a lost connection; an early head's object not the one opened,
        // or shorter: tools/early_head.h) only leaves the part to the source, which reads it whole.
        if (!head_->copy(part.offset, out.first(covered)).ok()) covered = 0;
      }
      return source.read_run(frames_[part.first], frames_[part.end - 1], out, covered, hand);
    };
    RangeRead got = attempt(true);
    // A frame that fails its digest is read again, the whole part from the source (not from the
    // head, whose copy may be the damaged one), as the mount's fetcher does: bits flipped on the
    // way are not the archive's fault. A damaged archive fails every attempt.
    auto damaged = [&](const RangeRead& r) {
      if (!r.status.ok()) return false;
      for (size_t j = 0; j < r.frames.size(); ++j)
        if (!handed[j] && r.frames[j].code() == ErrorCode::kCorrupt) return true;
      return false;
    };
    for (int n = 1; n < kCorruptFrameAttempts && damaged(got); ++n) got = attempt(false);
    if (!got.status.ok()) return fail(got.status);
    for (size_t j = 0; j < got.frames.size(); ++j)
      if (!handed[j]) return fail(got.frames[j].ok() ? Status(ErrorCode::kInternal, "a checked frame was not handed on") : got.frames[j]);
    compressed_read_ += part.length;
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(mu_);
    last_in_ = std::max(last_in_, now);
  }
}

void FramePipeline::decode_loop() {
  for (;;) {
    Fetched job;
    {
      std::unique_lock lock(mu_);
      // The lowest fetched position, once it is within the window ahead of the consumer.
      cv_.wait(lock, [&] { return !error_.ok() || (!todo_.empty() && todo_.begin()->first < next_take_ + decode_ahead_); });
      if (!error_.ok()) return;
      job = std::move(todo_.begin()->second);
      todo_.erase(todo_.begin());
    }
    const uint32_t frame = frames_[job.seq];
    std::shared_ptr<ByteBuffer> out = frame_buffers_->get(reader_.index().frames()[frame].uncompressed_size, largest_frame_);
    // FrameSource::read_run checked size and digest when the part came in: not again here.
    Status s = decode_digested_frame_into(reader_.index().frames()[frame], frame,
                                          std::as_bytes(std::span<const char>(job.bytes.data(), job.bytes.size())),
                                          std::as_writable_bytes(std::span<char>(out->data(), out->size())));
    job.part.reset();  // the part's buffer goes with its last frame
    if (!s.ok()) return fail(s.with_context(reader_.source().describe()));
    std::lock_guard lock(mu_);
    done_.emplace(job.seq, Frame(std::move(out)));
    cv_.notify_all();
  }
}

}  // namespace lazycache::format
