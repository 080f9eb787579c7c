// SPDX-License-Identifier: MIT
#include "tools/store_copy_sink.h"

#include <algorithm>

namespace lazycache::cli {

StoreCopySink::StoreCopySink(std::shared_ptr<remote::ObjectStore> store, std::unique_ptr<remote::MultipartUpload> upload,
                             remote::RangeRequest source, uint64_t part_bytes)
    : store_(std::move(store)), upload_(std::move(upload)), source_(std::move(source)),
      part_bytes_(std::clamp(part_bytes, upload_->min_part_bytes(), upload_->max_part_bytes())) {}

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
  // Split into parts no larger than part_bytes_ x 64 (1 GiB at 16 MiB parts): big enough that a
  // 2 GB archive takes a few copies, small enough that one retried copy is not a whole archive;
  // the last piece is never left below the minimum.
  const uint64_t max_copy = std::min(upload_->max_part_bytes(), part_bytes_ * 64);
  while (length > 0) {
    if (!copy_refused_.empty()) {  // the store turned the first copy down: send every byte
      LC_RETURN_IF_ERROR(read_back(offset, length));
      if (pending_.size() >= part_bytes_) LC_RETURN_IF_ERROR(send_pending());
      break;
    }
    uint64_t n = std::min(length, max_copy);
    if (length - n != 0 && length - n < min) n = length - min;
    Status copied = upload_->copy_part(next_part_, remote::RangeRequest{source_.key, offset, n, source_.if_match});
    if (!copied.ok() && counts_.parts_copied == 0 &&
        (copied.code() == ErrorCode::kUnsupported || copied.code() == ErrorCode::kInvalidArgument)) {
      // Multipart uploads without UploadPartCopy (GCS's XML API answers 501 or 400): the bytes
      // can still be sent, and the part number is free again.
      copy_refused_ = copied.message();
      continue;
    }
    LC_RETURN_IF_ERROR(copied);
    ++next_part_;
    counts_.bytes_copied += n;
    ++counts_.parts_copied;
    offset += n;
    length -= n;
  }
  failed_ = false;
  return Status();
}

Status StoreCopySink::commit() {
  if (failed_ || committed_) return Status(ErrorCode::kInvalidArgument, "commit of a failed or committed upload");
  failed_ = true;
  LC_RETURN_IF_ERROR(send_pending());
  LC_RETURN_IF_ERROR(upload_->complete().status());
  committed_ = true;
  failed_ = false;
  return Status();
}

}  // namespace lazycache::cli
