// SPDX-License-Identifier: MIT
#include "format/archive_head.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "format/frame_pipeline.h"

namespace lazycache::format {

namespace {
constexpr uint64_t kTailBytes = 256 * 1024;  // what ArchiveReader::open reads first anyway
}  // namespace

std::vector<uint64_t> ArchiveHead::plan(uint64_t object_bytes, uint64_t budget_bytes, int concurrency, uint64_t part_bytes) {
  std::vector<uint64_t> pieces;
  if (object_bytes < 2 * kTailBytes) return pieces;
  const uint64_t data_bytes = object_bytes - kTailBytes;
  // The pipeline's own plan, with pack's default 4 MiB frames and a decoder per CPU.
  const int decoders = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const FetchPlan p = choose_fetch_plan(data_bytes, parts_budget(budget_bytes, 4u << 20, decoders), concurrency, part_bytes);
  uint64_t at = 0;
  // One wave of parts as plan_fetch_parts() ramps them, over a uniform byte range.
  for (size_t k = 0; k < static_cast<size_t>(p.concurrency) && at < data_bytes; ++k) {
    uint64_t len = k < p.ramp_parts ? std::max<uint64_t>(1, p.part_bytes / p.ramp_parts * (k + 1)) : p.part_bytes;
    len = std::min(len, data_bytes - at);
    pieces.push_back(len);
    at += len;
  }
  return pieces;
}

ArchiveHead::ArchiveHead(std::shared_ptr<const ByteSource> source, const std::vector<uint64_t>& pieces) : source_(std::move(source)) {
  for (uint64_t len : pieces) {
    if (len == 0) continue;
    states_.push_back(Piece{length_, len, 0, false, Status()});
    length_ += len;
  }
  buffer_.reset(new char[length_]);  // default-initialised: see bytes_
  bytes_ = buffer_.get();
  for (size_t i = 0; i < states_.size(); ++i) threads_.emplace_back([this, i] { read_piece(i); });
}

ArchiveHead::ArchiveHead(std::string bytes) : length_(bytes.size()), kept_(std::move(bytes)), bytes_(kept_.data()) {
  if (length_ > 0) states_.push_back(Piece{0, length_, length_, true, Status()});
}

ArchiveHead::~ArchiveHead() { threads_.clear(); }  // joins: a read in flight finishes

void ArchiveHead::read_piece(size_t i) {
  const uint64_t offset = states_[i].offset, length = states_[i].length;  // immutable after construction
  auto out = std::as_writable_bytes(std::span<char>(bytes_ + offset, length));
  auto got = source_->read_at(offset, out);
  Status s;
  if (!got.ok())
    s = got.error().with_context("reading bytes " + std::to_string(offset) + "-" + std::to_string(offset + length) + " of " +
                                 source_->describe());
  std::lock_guard lock(mu_);
  states_[i].status = std::move(s);
  states_[i].got = got.ok() ? std::min<uint64_t>(*got, length) : 0;
  states_[i].done = true;
  cv_.notify_all();
}

Status ArchiveHead::copy(uint64_t offset, std::span<std::byte> out) const {
  if (offset > length_ || out.size() > length_ - offset)
    return Status(ErrorCode::kInvalidArgument, "bytes " + std::to_string(offset) + "+" + std::to_string(out.size()) +
                                                   " are not in the archive head of " + std::to_string(length_) + " bytes");
  const uint64_t end = offset + out.size();
  std::unique_lock lock(mu_);
  for (const Piece& p : states_) {
    if (p.offset + p.length <= offset || p.offset >= end) continue;
    cv_.wait(lock, [&] { return p.done; });
    if (!p.status.ok()) return p.status;
    if (std::min(end, p.offset + p.length) > p.offset + p.got)  // a short read holds only its first bytes
      return Status(ErrorCode::kCorrupt, source_->describe() + ": short read of bytes " + std::to_string(p.offset) + "-" +
                                             std::to_string(p.offset + p.length) + " (" + std::to_string(p.got) + " bytes)");
  }
  lock.unlock();
  if (!out.empty()) std::memcpy(out.data(), bytes_ + offset, out.size());
  return Status();
}

}  // namespace lazycache::format
