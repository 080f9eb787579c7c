// SPDX-License-Identifier: MIT
#include "format/archive_head.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "format/frame_pipeline.h"

namespace lazycache::format {

namespace {
constexpr uint64_t kTailBytes = 256 * 1024;  // what ArchiveReader::open reads first anyway
constexpr uint64_t kMaxTailBytes = 2ull << 20;
constexpr uint64_t kTailShare = 24;  // see tail_plan()

std::string range_text(uint64_t offset, uint64_t length) {
  return "bytes " + std::to_string(offset) + "-" + std::to_string(offset + length);
}

// ArchiveHead::reader_source(): the head's bytes from the head, the rest from the source.
class HeadedSource final : public ByteSource {
 public:
  HeadedSource(std::shared_ptr<const ArchiveHead> head, std::shared_ptr<const ByteSource> inner)
      : head_(std::move(head)), inner_(std::move(inner)) {}
  uint64_t size() const override { return inner_->size(); }
  std::string describe() const override { return inner_->describe(); }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override {
    const uint64_t size = inner_->size();
    if (offset >= size) return size_t{0};
    const uint64_t end = offset + std::min<uint64_t>(out.size(), size - offset);
    // The front and the tail are each one range, so what they miss is one range too: one read.
    const uint64_t gap_begin = std::max(offset, head_->length()), gap_end = std::min(end, head_->tail_offset());
    if (gap_begin < gap_end) {
      auto got = inner_->read_at(gap_begin, out.subspan(gap_begin - offset, gap_end - gap_begin));
      if (!got.ok()) return got.error();
      if (*got != gap_end - gap_begin) return static_cast<size_t>(gap_begin - offset + *got);  // the object ended early
    }
    if (offset < head_->length()) LC_RETURN_IF_ERROR(head_->copy(offset, out.first(std::min(end, head_->length()) - offset)));
    if (end > head_->tail_offset()) {
      const uint64_t from = std::max(offset, head_->tail_offset());
      LC_RETURN_IF_ERROR(head_->copy(from, out.subspan(from - offset, end - from)));
    }
    return static_cast<size_t>(end - offset);
  }

 private:
  const std::shared_ptr<const ArchiveHead> head_;
  const std::shared_ptr<const ByteSource> inner_;
};

}  // namespace

uint64_t ArchiveHead::tail_plan(uint64_t object_bytes) {
  return std::min(object_bytes, std::clamp(object_bytes / kTailShare, kTailBytes, kMaxTailBytes));
}

std::vector<uint64_t> ArchiveHead::plan(uint64_t object_bytes, uint64_t budget_bytes, int concurrency, uint64_t part_bytes) {
  std::vector<uint64_t> pieces;
  if (object_bytes < 2 * kTailBytes) return pieces;
  const uint64_t data_bytes = object_bytes - tail_plan(object_bytes);
  // The pipeline's own plan, with pack's default 4 MiB frames and a decoder per CPU.
  const int decoders = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const FetchPlan p = choose_fetch_plan(data_bytes, parts_budget(budget_bytes, 4u << 20, decoders), concurrency, part_bytes);
  const size_t reads = concurrency > 0 || part_bytes > 0 ? static_cast<size_t>(p.concurrency)
                                                         : std::min<size_t>(kAutoWaveReads, static_cast<size_t>(p.concurrency));
  uint64_t at = 0;
  // The first parts as plan_fetch_parts() ramps them, over a uniform byte range.
  for (size_t k = 0; k < reads && at < data_bytes; ++k) {
    uint64_t len = k < p.ramp_parts ? std::max<uint64_t>(1, p.part_bytes / p.ramp_parts * (k + 1)) : p.part_bytes;
    len = std::min(len, data_bytes - at);
    pieces.push_back(len);
    at += len;
  }
  return pieces;
}

ArchiveHead::ArchiveHead(std::shared_ptr<const ByteSource> source, const std::vector<uint64_t>& pieces, uint64_t tail_bytes)
    : source_(std::move(source)) {
  const uint64_t size = source_->size();
  for (uint64_t len : pieces) length_ += len;
  length_ = std::min(length_, size);
  tail_bytes = std::min(tail_bytes, size - length_);  // never overlapping the front
  tail_offset_ = size - tail_bytes;
  // The tail first: its thread starts (and its request goes out) before the front's.
  if (tail_bytes > 0) states_.push_back(Piece{tail_offset_, tail_bytes, std::string(tail_bytes, '\0'), false, Status()});
  uint64_t at = 0;
  for (uint64_t len : pieces) {
    len = std::min(len, length_ - at);
    if (len == 0) continue;
    states_.push_back(Piece{at, len, std::string(len, '\0'), false, Status()});
    at += len;
  }
  for (size_t i = 0; i < states_.size(); ++i) threads_.emplace_back([this, i] { read_piece(i); });
}

ArchiveHead::~ArchiveHead() { threads_.clear(); }  // joins: a read in flight finishes

std::shared_ptr<const ByteSource> ArchiveHead::reader_source() const { return std::make_shared<HeadedSource>(shared_from_this(), source_); }

void ArchiveHead::read_piece(size_t i) {
  Piece& piece = states_[i];  // offset, length and the buffer's size are immutable after construction
  const uint64_t offset = piece.offset, length = piece.length;
  auto got = source_->read_at(offset, std::as_writable_bytes(std::span<char>(piece.bytes)));
  Status s;
  if (!got.ok()) s = got.error().with_context("reading " + range_text(offset, length) + " of " + source_->describe());
  else if (*got != length)
    s = Status(ErrorCode::kCorrupt,
               source_->describe() + ": short read of " + range_text(offset, length) + " (the archive is shorter than its size)");
  std::lock_guard lock(mu_);
  piece.status = std::move(s);
  piece.done = true;
  cv_.notify_all();
}

Status ArchiveHead::copy(uint64_t offset, std::span<std::byte> out) const {
  const uint64_t end = offset + out.size();
  const bool in_front = offset <= length_ && out.size() <= length_ - offset;
  const bool in_tail = offset >= tail_offset_ && end <= source_->size() && end >= offset;
  if (!in_front && !in_tail)
    return Status(ErrorCode::kInvalidArgument, "bytes " + std::to_string(offset) + "+" + std::to_string(out.size()) +
                                                   " are not in the archive head of " + std::to_string(length_) +
                                                   " bytes or its tail from " + std::to_string(tail_offset_));
  auto overlaps = [&](const Piece& p) { return p.offset < end && p.offset + p.length > offset; };
  {
    std::unique_lock lock(mu_);
    for (const Piece& p : states_) {
      if (!overlaps(p)) continue;
      cv_.wait(lock, [&] { return p.done; });
      if (!p.status.ok()) return p.status;
    }
  }
  // A done piece's bytes are never written again: copied without the lock.
  for (const Piece& p : states_) {
    if (!overlaps(p)) continue;
    const uint64_t from = std::max(offset, p.offset), to = std::min(end, p.offset + p.length);
    std::memcpy(out.data() + (from - offset), p.bytes.data() + (from - p.offset), to - from);
  }
  return Status();
}

}  // namespace lazycache::format
