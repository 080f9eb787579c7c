// SPDX-License-Identifier: MIT
// File: remote/object_store.h -- ObjectStore, the narrow interface every store implements.
//
// Implementations: LocalDirObjectStore (the embedded default, file:// or a plain path),
// S3ObjectStore (s3://bucket/prefix, own SigV4 signer), HttpObjectStore (read-only http(s)://).
// Decorators (RetryingObjectStore, and remote/testing/'s FaultInjectingObjectStore) derive from
// ObjectStoreWrapper; remote/testing/'s MemoryObjectStore is a store of its own (in memory, for
// unit tests), not a wrapper.
//
// Contract for every method:
//  - Thread-safe; blocking; synchronous.
//  - Keys are relative to the store's base (bucket + prefix, or directory); they never start
//    with '/' and never contain ".." segments (callers get kInvalidArgument otherwise).
//  - Error mapping: 404 -> kNotFound, 401/403 -> kPermissionDenied, 412 -> kPreconditionFailed,
//    5xx/429/resets/stalls/short bodies -> kUnavailable, malformed replies -> kCorrupt,
//    409/412 on create-only publish -> kAlreadyExists, an unsupported feature -> kUnsupported.
//  - Messages name the operation and the key, never credentials.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_source.h"
#include "common/status.h"
#include "remote/multipart_upload.h"

namespace lazycache::remote {

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;             // opaque; pins ranged reads to one version
  int64_t last_modified_s = 0;  // seconds since the epoch (for "newest entry" lookups)
  // When the object was last used (record_access), seconds since the epoch; 0 where the store
  // keeps no such time (S3: its LRU order is last_modified_s, docs/stores.md "Store management").
  int64_t last_access_s = 0;
};

struct RangeRequest {
  std::string key;
  uint64_t offset = 0;
  uint64_t length = 0;   // must be > 0
  std::string if_match;  // empty: unpinned; else a replaced object gives kPreconditionFailed
  // Optional: told, as a reply that is the requested range comes in, how many bytes of `out`
  // from its start are in (ReadProgress in common/byte_source.h: only grows, never rewritten by
  // this call). A store that does not stream (the local directory) never calls it. A store that
  // retries (RetryingObjectStore) asks again only for the bytes not told yet.
  std::function<void(size_t)> on_progress = {};
  // Optional: once true, the GET ends and fails with kCancelled, never retried (HttpRequest's).
  const std::atomic<bool>* cancel = nullptr;
};

// The tail of an object and what identifies it, from one request where the server allows.
struct TailRead {
  ObjectInfo info;   // size and etag of the object the bytes came from
  size_t bytes = 0;  // the last `bytes` bytes of the object are in out[0, bytes)
};

struct ListPage {
  std::vector<ObjectInfo> objects;  // sorted by key
  std::string next_continuation;    // empty when this is the last page
};

// Source of an upload's bytes: called repeatedly; fills `out`, returns the count; 0 means end.
// Lets save stream compression straight into a multipart upload without a temp file.
using BodyReader = std::function<Result<size_t>(std::span<std::byte> out)>;

struct PutOptions {
  bool create_only = false;      // publish only if absent (If-None-Match: * where honoured)
  uint64_t part_size_bytes = 0;  // 0 = auto
  int concurrency = 0;           // 0 = auto
  uint64_t size_hint_bytes = 0;  // 0 = unknown (streaming)
};

// Request figures of a store since it was created (for status lines, `save` output, tests).
struct TransferStats {
  uint64_t requests = 0;  // HTTP requests sent (0 for stores without HTTP)
  int max_in_flight = 0;  // most requests in flight at the same moment
  uint64_t retries = 0;   // retried calls (RetryingObjectStore, multipart parts)
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // kNotFound when absent.
  virtual Result<ObjectInfo> head(std::string_view key) = 0;
  // Reads [offset, offset+length) into out (out.size() >= length). Returns the count, which is
  // short only at the end of the object. Every ranged reply is checked (206, exact
  // Content-Range); a wrong one is kCorrupt or kUnavailable, never silently accepted.
  virtual Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) = 0;
  // Stores the whole body under key. With create_only, an existing key gives kAlreadyExists
  // and nothing is replaced. A failed put leaves no visible object and no orphaned upload.
  virtual Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) = 0;
  // Reads the last min(length, size) bytes of key into out (out.size() >= length) together with
  // the object's size and etag, so a reader can open an entry with one request. The default does
  // head + get_range pinned to the etag; S3 overrides it with a suffix range (and falls back to
  // that default when a server answers suffix ranges wrongly). length must be > 0.
  virtual Result<TailRead> get_tail(std::string_view key, uint64_t length, std::span<std::byte> out);
  // One page of keys under prefix, in key order.
  virtual Result<ListPage> list(std::string_view prefix, std::string_view continuation) = 0;
  // Deleting an absent key is ok.
  virtual Status remove(std::string_view key) = 0;
  // Notes that key was just used (restored or mounted), for least-recently-used pruning. The
  // local directory store sets the file's access time; the default does nothing (S3 has no
  // access time: pruning goes by last_modified_s there). Best effort: callers may ignore errors.
  virtual Status record_access(std::string_view key) {
    (void)key;
    return Status();
  }
  // "s3://bucket/prefix", "file:///dir": for messages, without credentials.
  virtual std::string describe() const = 0;
  virtual TransferStats transfer_stats() const { return {}; }
  // An upload built from parts, some of them copied from objects of this store without passing
  // through this process (remote/multipart_upload.h). kUnsupported where the store cannot copy
  // ranges (the default; HTTP): the caller then sends every byte through put().
  virtual Result<std::unique_ptr<MultipartUpload>> start_upload(std::string_view key, const PutOptions& opts);
};

// Forwards every call to an inner store; decorators override what they change.
class ObjectStoreWrapper : public ObjectStore {
 public:
  explicit ObjectStoreWrapper(std::shared_ptr<ObjectStore> inner) : inner_(std::move(inner)) {}
  Result<ObjectInfo> head(std::string_view key) override { return inner_->head(key); }
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override { return inner_->get_range(req, out); }
  Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) override {
    return inner_->put(key, body, opts);
  }
  Result<TailRead> get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) override {
    return inner_->get_tail(key, length, out);
  }
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override { return inner_->list(prefix, continuation); }
  Status remove(std::string_view key) override { return inner_->remove(key); }
  Status record_access(std::string_view key) override { return inner_->record_access(key); }
  std::string describe() const override { return inner_->describe(); }
  TransferStats transfer_stats() const override { return inner_->transfer_stats(); }
  Result<std::unique_ptr<MultipartUpload>> start_upload(std::string_view key, const PutOptions& opts) override {
    return inner_->start_upload(key, opts);
  }

 protected:
  std::shared_ptr<ObjectStore> inner_;
};

// The key rules above: non-empty, no leading '/', no "." or ".." segment, no NUL, at most 1024
// bytes (S3's limit). kInvalidArgument naming the key and the rule otherwise.
Status check_object_key(std::string_view key);

}  // namespace lazycache::remote
