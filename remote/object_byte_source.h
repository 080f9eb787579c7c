// SPDX-License-Identifier: MIT
// File: remote/object_byte_source.h -- ObjectByteSource: a ByteSource over one store object,
// pinned to the ETag it was opened with. The FUSE layer and extract read archives through it.
//
// read_ranges sorts the requests, merges ranges that touch or nearly touch (gap up to
// merge_gap_bytes, merged size up to max_request_bytes) into single GETs, and runs those GETs
// concurrently, at most `concurrency` at a time. A tail (the archive's seek table and index) that
// was fetched while opening is kept and served from memory.
// Thread-safe; blocking. Errors: the store's, plus kPreconditionFailed when the object was
// replaced after open (every GET carries If-Match) and kUnavailable for short replies.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/byte_source.h"
#include "remote/object_store.h"

namespace lazycache::remote {

struct ObjectByteSourceConfig {
  // Simultaneous GETs of one read_ranges call. 8: loopback and S3 both scale to ~8 streams per
  // client before CPU (decompression) becomes the limit on 2-4 cores.
  int concurrency = 8;
  // Ranges closer than this are fetched as one GET (the gap is read and dropped): one request
  // costs about as much latency as 64 KiB of transfer on a fast link.
  uint64_t merge_gap_bytes = 64 << 10;
  // Upper bound of one merged GET; S3 guidance is 8-16 MB per ranged GET.
  uint64_t max_request_bytes = 16 << 20;
  // open(): the tail fetched with the first request (seek table + index of most archives).
  uint64_t tail_bytes = 256 << 10;
};

class ObjectByteSource final : public ByteSource {
 public:
  // One request where the store allows (suffix range): size, etag and the tail at once.
  // Errors: kNotFound and the store's.
  static Result<std::shared_ptr<ObjectByteSource>> open(std::shared_ptr<ObjectStore> store, std::string key,
                                                        ObjectByteSourceConfig config = {});
  // Pins to an object already known (from a list or head): no request.
  static std::shared_ptr<ObjectByteSource> from_info(std::shared_ptr<ObjectStore> store, const ObjectInfo& info,
                                                     ObjectByteSourceConfig config = {});
  // The same, keeping `tail` (the object's last tail.size() bytes, read with its info: the
  // lookup's get_tail) to serve reads inside it; counted as one request. kInvalidArgument when
  // the tail is longer than the object.
  static Result<std::shared_ptr<ObjectByteSource>> from_tail(std::shared_ptr<ObjectStore> store, const ObjectInfo& info, std::string tail,
                                                             ObjectByteSourceConfig config = {});

  uint64_t size() const override { return info_.size; }
  Result<size_t> read_at(uint64_t offset, std::span<std::byte> out) const override;
  // The GET's bytes are told as its body comes (RangeRequest::on_progress).
  Result<size_t> read_at_streaming(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress) const override;
  Status read_ranges(std::span<ReadRequest> requests) const override;
  std::string describe() const override { return store_->describe() + "/" + info_.key; }
  // Every GET in flight ends (RangeRequest::cancel) and fails with kCancelled, as do later reads.
  void cancel() const override { cancelled_.store(true, std::memory_order_relaxed); }

  // Frees the tail kept from open or from_tail (reads of it go to the store again): once the
  // archive's index is parsed, a mount has no use for the 1 MiB it read with its lookup. Not
  // thread-safe: call before the source is shared with other threads.
  void release_tail() { std::string().swap(tail_); }
  // The object's last bytes kept from open or from_tail (empty after release_tail()).
  std::string_view held_tail() const { return tail_; }

  const ObjectInfo& info() const { return info_; }
  // Figures for status lines and tests: GET requests sent and bytes they returned.
  uint64_t requests() const { return requests_.load(); }
  uint64_t bytes_fetched() const { return bytes_fetched_.load(); }

 private:
  ObjectByteSource(std::shared_ptr<ObjectStore> store, ObjectInfo info, ObjectByteSourceConfig config)
      : store_(std::move(store)), info_(std::move(info)), config_(config) {}
  // One GET of [offset, offset + out.size()), clipped to the object; fails on a short reply.
  // `progress` (optional) is told the bytes in as they come.
  Result<size_t> fetch(uint64_t offset, std::span<std::byte> out, const ReadProgress& progress = {}) const;

  std::shared_ptr<ObjectStore> store_;
  ObjectInfo info_;
  ObjectByteSourceConfig config_;
  std::string tail_;  // the last tail_.size() bytes of the object; immutable after open (but release_tail)
  mutable std::atomic<uint64_t> requests_{0}, bytes_fetched_{0};
  mutable std::atomic<bool> cancelled_{false};  // cancel() was called
};

}  // namespace lazycache::remote
