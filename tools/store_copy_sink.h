// SPDX-License-Identifier: MIT
// File: tools/store_copy_sink.h -- StoreCopySink: a ByteSink that publishes one store object
// through a remote::MultipartUpload, where a caller can also append a byte range of another
// object of the same store (the base archive of an incremental save) that the store copies
// itself, so those bytes never pass through the runner.
//
// The part rules of the upload (every part but the last >= min_part_bytes: 5 MiB on S3) are
// met here: bytes written are gathered into parts of part_bytes; a copied range shorter than the
// minimum, or the few MiB needed to bring the bytes pending before it up to the minimum, are
// read from the source (pinned to its ETag) and sent as bytes. So a copy costs at most
// min_part_bytes of download+upload, whatever is around it. Parts written are sent one at a
// time, in order, on the calling thread.
//
// Where the upload takes parts in any order (S3), every copy is queued the moment it is asked
// for, cut into parts of at most kMaxCopyPieceParts part sizes (copy_pieces()), and `concurrency`
// lanes (threads of this sink: the store's connection limit) copy them while the caller writes
// on, its parts numbered after them: all copies of a save are in flight together, across
// ranges, none waiting for an earlier range's batch. A server copies a part at the speed of one
// stream, and copies are nearly all the bytes of an incremental save. The lanes' copies are
// pinned by one HEAD of the source after all of them, in commit() (beside the create-only HEAD
// of the new object: MultipartUpload::complete_checking), not by x-amz-copy-source-if-match,
// which Swift answers with 412 for an unchanged source (remote/s3_upload_part_copy.cpp). A store that
// refuses a copy (kUnsupported or kInvalidArgument: 501 / 400, GCS's XML API) gets that part's
// bytes read back and sent by its lane (one such part in memory at a time: a lane mutex), and
// every later range read back by the caller (copy_refused() says why).
// Copies ahead (copy_ahead()): where parts go in any order, a caller that can guess its first
// copied range before it knows it (an incremental save: the base's data frames, all of which a
// small change keeps) has them copied as parts 1..k at once, so the store copies while the
// caller is still working out what to write. The first call after it decides: a copy_range()
// of the same start takes the pieces that fit in its range; everything else (bytes written
// first, another start, the pieces past the range's end) discards them: those not started yet
// are dropped, those running are waited for, and their numbers are sent again by the parts
// that follow (MultipartUpload::discard_part); a discarded copy costs the store's work only.
// Where parts go in order (the local store, copy_file_range), copies run on the calling thread:
// the very first alone and short (first_copy_bytes()), so a store that refuses it costs little,
// then the rest as consecutive parts (MultipartUpload::copy_parts).
//
// commit() sends the last part, waits for the lanes, checks the sources and completes the upload;
// a sink destroyed uncommitted (or after any error) stops its lanes and aborts it, so nothing
// is published. Single writer (the lanes are internal).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/byte_sink.h"
#include "remote/object_store.h"

namespace lazycache::cli {

struct StoreCopyCounts {
  uint64_t bytes_copied = 0;     // copied by the store (UploadPartCopy, copy_file_range)
  uint64_t bytes_sent = 0;       // uploaded from this process (written + read back from the source)
  uint64_t bytes_read_back = 0;  // of those, read from the source because a copy was too short
  uint32_t parts_copied = 0, parts_sent = 0;
};

// The first copy of a sink: long enough to be worth a request, short enough that running it
// alone (see above) costs little next to the parallel copies after it.
inline constexpr uint64_t kFirstCopyBytes = 8ull << 20;
// Copies are not cut below this: each part copied is a request with its own overhead in the
// server (Swift writes every part as an object of its own).
inline constexpr uint64_t kMinCopyPieceBytes = 8ull << 20;
// Nor above this many part sizes (64 MiB by default) where copies run on lanes: a part a store
// refuses to copy is read back whole into memory before it is sent.
inline constexpr uint64_t kMaxCopyPieceParts = 4;

// The length of the first copy of `length` bytes: kFirstCopyBytes (at least `min_part`), or all
// of it when the rest would be shorter than a part.
uint64_t first_copy_bytes(uint64_t length, uint64_t min_part);
// `length` bytes cut evenly into parts for `concurrency` parallel copies: as many as there are
// lanes while each keeps at least kMinCopyPieceBytes and `min_part` (a shorter length is one
// part), more where a part would exceed `max_part`. Pure.
std::vector<uint64_t> copy_pieces(uint64_t length, uint64_t min_part, uint64_t max_part, int concurrency);

class StoreCopySink final : public ByteSink {
 public:
  // `source`: key and if_match of the object copy_range() reads (offset and length unused).
  // `concurrency`: copies at once.
  StoreCopySink(std::shared_ptr<remote::ObjectStore> store, std::unique_ptr<remote::MultipartUpload> upload, remote::RangeRequest source,
                uint64_t part_bytes = 16ull << 20, int concurrency = 4);
  ~StoreCopySink() override;
  StoreCopySink(const StoreCopySink&) = delete;
  StoreCopySink& operator=(const StoreCopySink&) = delete;

  Status write(std::span<const std::byte> bytes) override;
  // Appends bytes [offset, offset + length) of the source object.
  Status copy_range(uint64_t offset, uint64_t length);
  // Starts copying [offset, offset + length) of the source as the first parts, ahead of the
  // copy_range() the caller expects to make first (see above). Nothing happens where parts go
  // in order, once anything was written, copied or queued, or for less than min_copy_bytes().
  void copy_ahead(uint64_t offset, uint64_t length);
  Status commit() override;
  uint64_t bytes_written() const override { return written_; }

  // Complete once commit() returned (copies a lane had to send instead are counted as sent).
  StoreCopyCounts counts() const;
  // Why the store turned a copy down (a server without UploadPartCopy: 501 or 400), after which
  // the ranges were read back and sent; empty while it copies.
  std::string copy_refused() const;
  // The shortest copy worth asking for: shorter ones are mostly read back (see above).
  uint64_t min_copy_bytes() const { return 2 * upload_->min_part_bytes(); }

 private:
  struct CopyJob {
    int number = 0;
    remote::RangeRequest source;
  };
  // A piece copy_ahead() queued: part `number` is source bytes [offset, offset + length).
  struct AheadPiece {
    int number = 0;
    uint64_t offset = 0, length = 0;
  };
  Status send_pending();
  // The first call after copy_ahead(): takes the pieces that start at `offset` and end within
  // `length` (advancing both), then discards the rest. `offset` null: a write, uses none.
  Status settle_ahead(uint64_t* offset, uint64_t* length);
  Status read_back(uint64_t offset, uint64_t length);
  // Any-order uploads: queues `length` bytes from `offset` as parts for the lanes.
  void queue_copies(uint64_t offset, uint64_t length);
  void lane();
  Status run_copy(const CopyJob& job);
  // Waits until every queued copy finished: the first failure, if any.
  Status wait_for_copies();

  std::shared_ptr<remote::ObjectStore> store_;
  std::unique_ptr<remote::MultipartUpload> upload_;
  remote::RangeRequest source_;
  uint64_t part_bytes_;
  int concurrency_;
  std::vector<std::byte> pending_;
  int next_part_ = 1;
  uint64_t written_ = 0;
  bool failed_ = false, committed_ = false;
  bool queued_any_ = false;        // a copy went to the lanes: commit() checks the source
  std::vector<AheadPiece> ahead_;  // copy_ahead()'s pieces, until the first call settles them
  StoreCopyCounts counts_;         // the writer's; the lanes' changes are in lane_sent_

  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable work_cv_, idle_cv_;
  std::deque<CopyJob> queue_;
  int running_ = 0;
  std::set<int> running_numbers_;  // the parts the lanes are copying now
  bool closing_ = false;
  Status lane_status_;                 // the first failure of a lane
  std::string copy_refused_;           // why the store refused a copy
  std::map<int, uint64_t> lane_sent_;  // parts queued as copies that a lane sent instead: number -> bytes
  std::mutex fallback_mu_;             // one refused part read back at a time (memory)
  std::vector<std::jthread> lanes_;    // last: joined (destroyed) before the upload is aborted
};

}  // namespace lazycache::cli
