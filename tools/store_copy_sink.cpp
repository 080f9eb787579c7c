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

// The upload aborts itself when destroyed uncompleted (remote/multipart_upload.h).
StoreCopySink::~StoreCopySink() = default;

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
  if (copy_refused_.empty() && counts_.parts_copied == 0) {
    // The first copy alone, and short: a store without UploadPartCopy refuses it (then every
    // byte is sent, the part number free again), and S3 learns there whether the server honours
    // x-amz-copy-source-if-match before copies run at once.
    const uint64_t n = first_copy_bytes(length, min);
    Status copied = upload_->copy_part(next_part_, remote::RangeRequest{source_.key, offset, n, source_.if_match});
    if (!copied.ok() && (copied.code() == ErrorCode::kUnsupported || copied.code() == ErrorCode::kInvalidArgument)) {
      // Multipart uploads without UploadPartCopy (GCS's XML API answers 501 or 400).
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
  if (!copy_refused_.empty()) {  // the store turned the first copy down: send every byte, a part at a time
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
  if (upload_->parts_in_any_order()) {
    // In the background: the writer goes on with the changed files and the index (parts
    // numbered after these) while the store copies; commit() waits for it. One batch at a time.
    LC_RETURN_IF_ERROR(join_background());
    background_ = std::jthread([this, first = next_part_, sources = std::move(sources)] {
      background_status_ = upload_->copy_parts(first, sources, concurrency_);
    });
  } else {
    LC_RETURN_IF_ERROR(upload_->copy_parts(next_part_, sources, concurrency_));
  }
  next_part_ += static_cast<int>(pieces.size());
  counts_.bytes_copied += length;
  counts_.parts_copied += static_cast<uint32_t>(pieces.size());
  failed_ = false;
  return Status();
}

Status StoreCopySink::join_background() {
  if (!background_.joinable()) return Status();
  background_.join();
  return std::exchange(background_status_, Status());
}

Status StoreCopySink::commit() {
  if (failed_ || committed_) return Status(ErrorCode::kInvalidArgument, "commit of a failed or committed upload");
  failed_ = true;
  LC_RETURN_IF_ERROR(send_pending());
  LC_RETURN_IF_ERROR(join_background());
  LC_RETURN_IF_ERROR(upload_->complete().status());
  committed_ = true;
  failed_ = false;
  return Status();
}

}  // namespace lazycache::cli
