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
// time, in order, on the calling thread. A copied range is cut into up to `concurrency` parts
// (copy_pieces()) that the store copies at once (MultipartUpload::copy_parts): a server copies a
// part at the speed of one stream, and copies are nearly all the bytes of an incremental save.
// Where the upload takes parts in any order (S3), those copies run on a background thread while
// the caller writes on (its parts numbered after them); commit() waits for them, and reports
// their failure.
// The very first copy goes alone and short (first_copy_bytes()): a store that answers it with
// kUnsupported or kInvalidArgument (501 / 400) gets every later range read back and sent
// instead (copy_refused() says why).
//
// commit() sends the last part and completes the upload; a sink destroyed uncommitted (or after
// any error) aborts it, so nothing is published. Single writer.
#pragma once

#include <cstdint>
#include <memory>
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
  Status commit() override;
  uint64_t bytes_written() const override { return written_; }

  const StoreCopyCounts& counts() const { return counts_; }
  // Why the store turned down the first copy (a server without UploadPartCopy: 501 or 400),
  // after which every range was read back and sent; empty while it copies.
  const std::string& copy_refused() const { return copy_refused_; }
  // The shortest copy worth asking for: shorter ones are mostly read back (see above).
  uint64_t min_copy_bytes() const { return 2 * upload_->min_part_bytes(); }

 private:
  Status send_pending();
  // Waits for the copies running in the background, if any: their status.
  Status join_background();
  Status read_back(uint64_t offset, uint64_t length);

  std::shared_ptr<remote::ObjectStore> store_;
  std::unique_ptr<remote::MultipartUpload> upload_;
  remote::RangeRequest source_;
  uint64_t part_bytes_;
  int concurrency_;
  std::vector<std::byte> pending_;
  int next_part_ = 1;
  uint64_t written_ = 0;
  bool failed_ = false, committed_ = false;
  std::string copy_refused_;
  StoreCopyCounts counts_;
  Status background_status_;  // written by background_ before it ends, read after the join
  std::jthread background_;   // last: joined (destroyed) before the upload it copies into is aborted
};

}  // namespace lazycache::cli
