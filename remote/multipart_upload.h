// SPDX-License-Identifier: MIT
// File: remote/multipart_upload.h -- MultipartUpload: one object built from numbered parts, each
// either bytes sent by the runner or a byte range of an object already in the store, copied by
// the store itself (S3 UploadPartCopy; copy_file_range on a local directory). This is what lets
// an incremental save publish a new archive without moving the unchanged frames of its base
// through the runner. Which ranges to copy is the caller's business (tools/).
//
// Contract:
//  - Parts are numbered 1, 2, 3 ... and sent in that order, one at a time (the local store
//    appends them; S3 would take any order, but nothing here needs it).
//  - Every part but the last must hold at least min_part_bytes() (5 MiB on S3) and at most
//    max_part_bytes() (5 GiB); the store rejects others (S3 at complete, with EntityTooSmall).
//  - copy_part's source is pinned: `source.if_match` is the ETag the caller read the object
//    with, and a replaced object gives kPreconditionFailed, never the new object's bytes.
//  - complete() publishes the object (create-only as PutOptions says: kAlreadyExists, nothing
//    replaced). Destroying an upload that was not completed aborts it: no object, no orphaned
//    parts. Any failed call leaves the upload to be aborted that way.
// Not thread-safe: one caller.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"

namespace lazycache::remote {

struct ObjectInfo;
struct RangeRequest;

class MultipartUpload {
 public:
  virtual ~MultipartUpload() = default;
  virtual uint64_t min_part_bytes() const = 0;
  virtual uint64_t max_part_bytes() const = 0;
  virtual Status upload_part(int number, std::span<const std::byte> bytes) = 0;
  // Part `number` is [source.offset, source.offset + source.length) of object source.key.
  // kNotFound when that object is gone, kPreconditionFailed when it was replaced, kInvalidArgument
  // when the range is past its end.
  virtual Status copy_part(int number, const RangeRequest& source) = 0;
  virtual Result<ObjectInfo> complete() = 0;
};

}  // namespace lazycache::remote
