// SPDX-License-Identifier: MIT
// File: remote/multipart_upload.h -- MultipartUpload: one object built from numbered parts, each
// either bytes sent by the runner or a byte range of an object already in the store, copied by
// the store itself (S3 UploadPartCopy; copy_file_range on a local directory). This is what lets
// an incremental save publish a new archive without moving the unchanged frames of its base
// through the runner. Which ranges to copy is the caller's business (tools/).
//
// Contract:
//  - Parts are numbered 1 .. N, each sent once (upload_part, copy_part or copy_parts), and where
//    parts_in_any_order() is false (the local store appends them) in that order, one call at a
//    time. Where it is true (S3), they may be sent in any order and from several threads at once,
//    so a caller can copy parts in the background while it uploads later ones; complete() comes
//    after every such call has returned. copy_parts() hands the store a run of consecutive
//    copied parts at once, which S3 copies concurrently: a server copies one part at the speed of
//    one stream, and the copies of an incremental save are nearly all of its bytes.
//  - Every part but the last must hold at least min_part_bytes() (5 MiB on S3) and at most
//    max_part_bytes() (5 GiB); the store rejects others (S3 at complete, with EntityTooSmall).
//  - copy_part's source is pinned: `source.if_match` is the ETag the caller read the object
//    with, and a replaced object gives kPreconditionFailed, never the new object's bytes.
//  - complete() publishes the object (create-only as PutOptions says: kAlreadyExists, nothing
//    replaced); kInvalidArgument when a part of 1 .. N was not sent. Destroying an upload that was
//    not completed aborts it: no object, no orphaned parts. Any failed call leaves the upload to
//    be aborted that way.
// Not thread-safe beyond what parts_in_any_order() allows: one caller.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace lazycache::remote {

struct ObjectInfo;
struct RangeRequest;

class MultipartUpload {
 public:
  virtual ~MultipartUpload() = default;
  virtual uint64_t min_part_bytes() const = 0;
  virtual uint64_t max_part_bytes() const = 0;
  // See the contract above: true when parts may be sent in any order, from several threads.
  virtual bool parts_in_any_order() const { return false; }
  virtual Status upload_part(int number, std::span<const std::byte> bytes) = 0;
  // Part `number` is [source.offset, source.offset + source.length) of object source.key.
  // kNotFound when that object is gone, kPreconditionFailed when it was replaced, kInvalidArgument
  // when the range is past its end.
  virtual Status copy_part(int number, const RangeRequest& source) = 0;
  // Parts first_number, first_number + 1, ... are the ranges `sources` in that order, as if by
  // copy_part each (same errors), copied up to `concurrency` at a time where the store can (S3:
  // UploadPartCopy requests in parallel, the source checked once after all of them); the default
  // copies them one by one. Returns once every copy finished or failed.
  virtual Status copy_parts(int first_number, const std::vector<RangeRequest>& sources, int concurrency);
  // As copy_part, but a store that pins copies with a check after them (S3: a HEAD of the
  // source, because servers ignore or misread x-amz-copy-source-if-match: docs/stores.md) leaves
  // that check to check_copy_sources(), so that copies sent from several threads at once pay it
  // once (S3 then sends no condition at all). The default is copy_part.
  virtual Status copy_part_unchecked(int number, const RangeRequest& source) { return copy_part(number, source); }
  // The check copy_part_unchecked() left out, once per source object and ETag:
  // kPreconditionFailed when one was replaced. Call it after the copies, before complete().
  // The default has nothing to check (copy_part pinned each copy itself).
  virtual Status check_copy_sources(const std::vector<RangeRequest>& sources);
  // Where parts go in any order: part `number`, sent or copied by a call that has returned,
  // is no longer wanted. Its number may be sent again (S3: the later part replaces it), and
  // complete() leaves it out when nothing is sent under it again; a number never sent is fine.
  // That happens only for the highest numbers (complete() still needs 1 .. N without a gap):
  // S3 frees parts left out at completion, Swift s3api keeps them as segments nothing refers
  // to. For copies made ahead of the writer that it did not use (tools/store_copy_sink.h).
  // Default (stores that append parts in order): kUnsupported.
  virtual Status discard_part(int number);
  virtual Result<ObjectInfo> complete() = 0;
  // check_copy_sources(sources), then complete(); a store whose completion makes a request of
  // its own first (S3 create-only: a HEAD of the new key) runs the checks beside it, saving a
  // round trip at the end of every save that copied.
  virtual Result<ObjectInfo> complete_checking(const std::vector<RangeRequest>& sources);
};

}  // namespace lazycache::remote
