// SPDX-License-Identifier: MIT
// File: remote/testing/memory_object_store.h -- MemoryObjectStore, an ObjectStore held in memory
// for unit tests (never linked into the product). Same semantics as the real stores: ETags pin
// ranged reads (a replaced object gives kPreconditionFailed), create-only publish gives
// kAlreadyExists, a failed put leaves nothing visible, list pages are in key order.
//
// Thread-safe: every method may be called from any thread. Object bytes are immutable and
// shared, so get_range copies outside the lock and never blocks writers for long.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "remote/object_store.h"
#include "remote/testing/store_op.h"

namespace lazycache::remote::testing {

struct MemoryObjectStoreConfig {
  std::string name = "test";     // describe() gives "memory://<name>"
  size_t list_page_size = 1000;  // S3's maximum max-keys; tests lower it to exercise paging
};

class MemoryObjectStore final : public ObjectStore {
 public:
  explicit MemoryObjectStore(MemoryObjectStoreConfig config = {});

  // ObjectStore. Errors: kInvalidArgument (bad key, zero length, offset past the end),
  // kNotFound, kPreconditionFailed (if_match differs), kAlreadyExists (create_only), and any
  // error the BodyReader returns (then nothing is stored).
  Result<ObjectInfo> head(std::string_view key) override;
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override;
  Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) override;
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override;
  Status remove(std::string_view key) override;
  std::string describe() const override { return "memory://" + config_.name; }

  // Test helpers (not counted as calls).
  // Stores or replaces `key`; a replaced object gets a new ETag, like a re-upload.
  ObjectInfo put_bytes(std::string_view key, std::string bytes);
  // Current content; kNotFound when absent.
  Result<std::string> get_bytes(std::string_view key) const;
  bool contains(std::string_view key) const;
  size_t object_count() const;
  // Timestamp given to the next stored objects (seconds since the epoch); default 1.7e9, then +1
  // per put, so "newest" lookups are deterministic.
  void set_next_last_modified(int64_t seconds);
  // How many times each op was called (including failed calls).
  uint64_t calls(StoreOp op) const { return calls_[static_cast<size_t>(op)].load(); }

 private:
  struct Object {
    std::shared_ptr<const std::string> bytes;
    std::string etag;
    int64_t last_modified_s = 0;
  };
  ObjectInfo store_locked(std::string_view key, std::string bytes);  // requires mu_
  void count(StoreOp op) { calls_[static_cast<size_t>(op)].fetch_add(1); }

  MemoryObjectStoreConfig config_;
  mutable std::mutex mu_;  // guards objects_, generation_, next_mtime_
  std::map<std::string, Object, std::less<>> objects_;
  uint64_t generation_ = 0;
  int64_t next_mtime_ = 1'700'000'000;
  std::array<std::atomic<uint64_t>, static_cast<size_t>(StoreOp::kCount)> calls_{};
};

}  // namespace lazycache::remote::testing
