// SPDX-License-Identifier: MIT
#include "tools/store_copy_sink.h"

#include <algorithm>
#include <utility>

namespace lazycache::cli {

uint64_t first_copy_bytes(uint64_t length, uint64_t min_part) {
  const uint64_t want = std::max(min_part, kFirstCopyBytes);
  // What is left must be nothing or a part of its own.
  if (length <= want || length - want < min_part) return length;
  return want;
}

std::vector<uint64_t> copy_pieces(uint64_t length, uint64_t min_part, uint64_t max_part, int concurrency) {
  std::vector<uint64_t> out;
  if (length == 0) return out;
  // One piece per lane while each keeps at least kMinCopyPieceBytes (and the store's minimum),
  // more when a piece would exceed max_part; then cut evenly, so none is short.
  const uint64_t floor_bytes = std::max(kMinCopyPieceBytes, min_part);
  uint64_t count = std::min<uint64_t>(static_cast<uint64_t>(std::max(1, concurrency)), length / floor_bytes);
  count = std::max<uint64_t>({count, 1, (length + max_part - 1) / max_part});
  for (uint64_t i = 0; i < count; ++i) out.push_back(length / count + (i < length % count ? 1 : 0));
  return out;
}

StoreCopySink::StoreCopySink(std::shared_ptr<remote::ObjectStore> store, std::unique_ptr<remote::MultipartUpload> upload,
                             remote::RangeRequest source, uint64_t part_bytes, int concurrency)
    : store_(std::move(store)), upload_(std::move(upload)), source_(std::move(source)),
      part_bytes_(std::clamp(part_bytes, upload_->min_part_bytes(), upload_->max_part_bytes())), concurrency_(std::max(1, concurrency)) {}

// The lanes stop (a copy in flight finishes first) before the upload, destroyed uncompleted,
// aborts itself (remote/multipart_upload.h).
StoreCopySink::~StoreCopySink() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
    queue_.clear();
  }
  work_cv_.notify_all();
  lanes_.clear();
}

StoreCopyCounts StoreCopySink::counts() const {
  StoreCopyCounts c = counts_;
  std::lock_guard lock(mu_);
  for (const auto& [number, bytes] : lane_sent_) {
    c.bytes_copied -= bytes;
    --c.parts_copied;
    c.bytes_sent += bytes;
    c.bytes_read_back += bytes;
    ++c.parts_sent;
  }
  return c;
}

std::string StoreCopySink::copy_refused() const {
  std::lock_guard lock(mu_);
  return copy_refused_;
}

Status StoreCopySink::send_pending() {
  if (pending_.empty()) return Status();
  Status s = upload_->upload_part(next_part_++, pending_);
  if (!s.ok()) return s;
  counts_.bytes_sent += pending_.size();
  ++counts_.parts_sent;
  pending_.clear();
  return Status();
}

Status StoreCopySink::write(std::span<const std::byte> bytes) {
  if (failed_ || committed_) return Status(ErrorCode::kInvalidArgument, "write to a failed or committed upload");
  if (!ahead_.empty()) {
    Status s = settle_ahead(nullptr, nullptr);
    failed_ = !s.ok();
    LC_RETURN_IF_ERROR(s);
  }
  pending_.insert(pending_.end(), bytes.begin(), bytes.end());
  written_ += bytes.size();
  if (pending_.size() >= part_bytes_) {
    Status s = send_pending();
    failed_ = !s.ok();
    return s;
  }
  return Status();
}

Status StoreCopySink::read_back(uint64_t offset, uint64_t length) {
  const size_t at = pending_.size();
  pending_.resize(at + length);
  remote::RangeRequest req{source_.key, offset, length, source_.if_match};
  auto got = store_->get_range(req, std::span<std::byte>(pending_).subspan(at));
  if (!got.ok()) return got.error().with_context("reading back bytes of " + source_.key);
  if (*got != length) return Status(ErrorCode::kUnavailable, "short read of " + source_.key + " at " + std::to_string(offset));
  counts_.bytes_read_back += length;
  return Status();
}

Status StoreCopySink::copy_range(uint64_t offset, uint64_t length) {
  if (failed_ || committed_) return Status(ErrorCode::kInvalidArgument, "copy into a failed or committed upload");
  failed_ = true;  // until this call succeeds
  written_ += length;
  if (!ahead_.empty()) {
    LC_RETURN_IF_ERROR(settle_ahead(&offset, &length));
    if (length == 0) {
      failed_ = false;
      return Status();
    }
  }
  const uint64_t min = upload_->min_part_bytes();
  // Bytes pending before the copy must become a part of at least `min`: borrow the start of
  // the range. What is too short to be a part of its own is read back whole.
  if (!pending_.empty() && pending_.size() < min) {
    const uint64_t borrow = std::min<uint64_t>(length, min - pending_.size());
    LC_RETURN_IF_ERROR(read_back(offset, borrow));
    offset += borrow;
    length -= borrow;
  }
  if (length < min) {
    if (length > 0) LC_RETURN_IF_ERROR(read_back(offset, length));
    failed_ = false;
    return Status();
  }
  LC_RETURN_IF_ERROR(send_pending());
  if (upload_->parts_in_any_order() && copy_refused().empty()) {
    queue_copies(offset, length);
    failed_ = false;
    return Status();
  }
  if (copy_refused().empty() && counts_.parts_copied == 0) {
    // The first copy alone, and short: a store without UploadPartCopy refuses it (then every
    // byte is sent, the part number free again), and S3 learns there whether the server honours
    // x-amz-copy-source-if-match before copies run at once.
    const uint64_t n = first_copy_bytes(length, min);
    Status copied = upload_->copy_part(next_part_, remote::RangeRequest{source_.key, offset, n, source_.if_match});
    if (!copied.ok() && (copied.code() == ErrorCode::kUnsupported || copied.code() == ErrorCode::kInvalidArgument)) {
      // Multipart uploads without UploadPartCopy (GCS's XML API answers 501 or 400).
      std::lock_guard lock(mu_);
      copy_refused_ = copied.message();
    } else {
      LC_RETURN_IF_ERROR(copied);
      ++next_part_;
      counts_.bytes_copied += n;
      ++counts_.parts_copied;
      offset += n;
      length -= n;
    }
  }
  if (!copy_refused().empty()) {  // the store turned a copy down: send every byte, a part at a time
    while (length > 0) {
      const uint64_t n = std::min<uint64_t>(length, part_bytes_ - pending_.size());  // pending_ < part_bytes_ here
      LC_RETURN_IF_ERROR(read_back(offset, n));
      offset += n;
      length -= n;
      if (pending_.size() >= part_bytes_) LC_RETURN_IF_ERROR(send_pending());
    }
    failed_ = false;
    return Status();
  }
  const std::vector<uint64_t> pieces = copy_pieces(length, min, std::min(upload_->max_part_bytes(), part_bytes_ * 64), concurrency_);
  std::vector<remote::RangeRequest> sources;
  for (uint64_t n : pieces) {
    sources.push_back(remote::RangeRequest{source_.key, offset, n, source_.if_match});
    offset += n;
  }
  LC_RETURN_IF_ERROR(upload_->copy_parts(next_part_, sources, concurrency_));
  next_part_ += static_cast<int>(pieces.size());
  counts_.bytes_copied += length;
  counts_.parts_copied += static_cast<uint32_t>(pieces.size());
  failed_ = false;
  return Status();
}

void StoreCopySink::copy_ahead(uint64_t offset, uint64_t length) {
  if (!upload_->parts_in_any_order() || failed_ || committed_ || written_ > 0 || next_part_ != 1 || length < min_copy_bytes()) return;
  const uint64_t max_piece = std::min(upload_->max_part_bytes(), part_bytes_ * kMaxCopyPieceParts);
  {
    std::lock_guard lock(mu_);
    if (!queue_.empty() || running_ > 0 || !copy_refused_.empty()) return;
    for (uint64_t n : copy_pieces(length, upload_->min_part_bytes(), max_piece, concurrency_)) {
      ahead_.push_back(AheadPiece{next_part_, offset, n});
      queue_.push_back(CopyJob{next_part_++, remote::RangeRequest{source_.key, offset, n, source_.if_match}});
      offset += n;
    }
  }
  while (lanes_.size() < static_cast<size_t>(concurrency_) && lanes_.size() < ahead_.size()) lanes_.emplace_back([this] { lane(); });
  work_cv_.notify_all();
}

Status StoreCopySink::settle_ahead(uint64_t* offset, uint64_t* length) {
  size_t used = 0;
  if (offset && pending_.empty()) {
    while (used < ahead_.size() && ahead_[used].offset == *offset && ahead_[used].length <= *length) {
      *offset += ahead_[used].length;
      *length -= ahead_[used].length;
      counts_.bytes_copied += ahead_[used].length;
      ++counts_.parts_copied;
      ++used;
    }
  }
  if (used > 0) queued_any_ = true;
  std::vector<AheadPiece> unused(ahead_.begin() + static_cast<std::ptrdiff_t>(used), ahead_.end());
  next_part_ = unused.empty() ? ahead_.back().number + 1 : unused.front().number;
  ahead_.clear();
  if (unused.empty()) return Status();
  // Later parts take the unused numbers: each copy under them must be dropped before it starts
  // or have finished, so that what is sent next surely replaces it.
  std::set<int> numbers;
  for (const AheadPiece& p : unused) numbers.insert(p.number);
  {
    std::unique_lock lock(mu_);
    std::erase_if(queue_, [&](const CopyJob& j) { return numbers.count(j.number) > 0; });
    idle_cv_.wait(lock, [&] {
      for (int n : running_numbers_)
        if (numbers.count(n)) return false;
      return true;
    });
    LC_RETURN_IF_ERROR(lane_status_);
    for (int n : numbers) lane_sent_.erase(n);
  }
  for (int n : numbers) LC_RETURN_IF_ERROR(upload_->discard_part(n));
  return Status();
}

void StoreCopySink::queue_copies(uint64_t offset, uint64_t length) {
  const uint64_t max_piece = std::min(upload_->max_part_bytes(), part_bytes_ * kMaxCopyPieceParts);
  const std::vector<uint64_t> pieces = copy_pieces(length, upload_->min_part_bytes(), max_piece, concurrency_);
  {
    std::lock_guard lock(mu_);
    for (uint64_t n : pieces) {
      queue_.push_back(CopyJob{next_part_++, remote::RangeRequest{source_.key, offset, n, source_.if_match}});
      offset += n;
    }
  }
  counts_.bytes_copied += length;
  counts_.parts_copied += static_cast<uint32_t>(pieces.size());
  queued_any_ = true;
  // Lanes start with the first copies and stay until the sink goes; never more than pieces queued.
  while (lanes_.size() < static_cast<size_t>(concurrency_) && lanes_.size() < static_cast<size_t>(counts_.parts_copied))
    lanes_.emplace_back([this] { lane(); });
  work_cv_.notify_all();
}

void StoreCopySink::lane() {
  for (;;) {
    CopyJob job;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      running_numbers_.insert(job.number);
    }
    Status s = run_copy(job);
    {
      std::lock_guard lock(mu_);
      --running_;
      running_numbers_.erase(job.number);
      if (!s.ok() && lane_status_.ok()) {
        lane_status_ = s;
        queue_.clear();  // the upload fails: copying on would only cost the store
      }
    }
    idle_cv_.notify_all();
  }
}

Status StoreCopySink::run_copy(const CopyJob& job) {
  if (copy_refused().empty()) {
    Status copied = upload_->copy_part_unchecked(job.number, job.source);
    if (copied.ok() || (copied.code() != ErrorCode::kUnsupported && copied.code() != ErrorCode::kInvalidArgument)) return copied;
    std::lock_guard lock(mu_);
    if (copy_refused_.empty()) copy_refused_ = copied.message();  // multipart uploads without UploadPartCopy
  }
  // The store cannot copy: this part's bytes read back and sent under its number.
  std::lock_guard one_at_a_time(fallback_mu_);
  std::vector<std::byte> bytes(job.source.length);
  auto got = store_->get_range(job.source, bytes);
  if (!got.ok()) return got.error().with_context("reading back bytes of " + source_.key);
  if (*got != bytes.size())
    return Status(ErrorCode::kUnavailable, "short read of " + source_.key + " at " + std::to_string(job.source.offset));
  LC_RETURN_IF_ERROR(upload_->upload_part(job.number, bytes));
  std::lock_guard lock(mu_);
  lane_sent_[job.number] = bytes.size();
  return Status();
}

Status StoreCopySink::wait_for_copies() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && running_ == 0) || !lane_status_.ok(); });
  // After a failure, wait for the copies still in flight too: the upload is aborted after them.
  idle_cv_.wait(lock, [&] { return running_ == 0; });
  return lane_status_;
}

Status StoreCopySink::commit() {
  if (failed_ || committed_) return Status(ErrorCode::kInvalidArgument, "commit of a failed or committed upload");
  failed_ = true;
  if (!ahead_.empty()) LC_RETURN_IF_ERROR(settle_ahead(nullptr, nullptr));
  LC_RETURN_IF_ERROR(send_pending());
  LC_RETURN_IF_ERROR(wait_for_copies());
  // One HEAD of the base for all the lanes' copies, where the store pins copies that way (beside
  // the create-only HEAD of the new object, where there is one).
  std::vector<remote::RangeRequest> pinned;
  if (queued_any_) pinned.push_back(source_);
  LC_RETURN_IF_ERROR(upload_->complete_checking(pinned).status());
  committed_ = true;
  failed_ = false;
  return Status();
}

}  // namespace lazycache::cli
