// SPDX-License-Identifier: MIT
#include "remote/testing/memory_object_store.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <xxhash.h>

namespace lazycache::remote::testing {

MemoryObjectStore::MemoryObjectStore(MemoryObjectStoreConfig config) : config_(std::move(config)) {
  if (config_.list_page_size == 0) config_.list_page_size = 1;
}

ObjectInfo MemoryObjectStore::store_locked(std::string_view key, std::string bytes) {
  ++generation_;
  // The generation makes a re-upload of identical bytes a new version, as S3 versioning would
  // for If-Match purposes; the hash makes ETags look content-derived in logs.
  char etag[64];
  snprintf(etag, sizeof etag, "\"m%llu-%016llx\"", static_cast<unsigned long long>(generation_),
           static_cast<unsigned long long>(XXH64(bytes.data(), bytes.size(), 0)));
  Object obj{std::make_shared<const std::string>(std::move(bytes)), etag, next_mtime_++};
  ObjectInfo info{std::string(key), obj.bytes->size(), obj.etag, obj.last_modified_s};
  objects_.insert_or_assign(std::string(key), std::move(obj));
  return info;
}

ObjectInfo MemoryObjectStore::put_bytes(std::string_view key, std::string bytes) {
  std::lock_guard lock(mu_);
  return store_locked(key, std::move(bytes));
}

Result<std::string> MemoryObjectStore::get_bytes(std::string_view key) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " in " + describe());
  return *it->second.bytes;
}

bool MemoryObjectStore::contains(std::string_view key) const {
  std::lock_guard lock(mu_);
  return objects_.count(key) != 0;
}

size_t MemoryObjectStore::object_count() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

void MemoryObjectStore::set_next_last_modified(int64_t seconds) {
  std::lock_guard lock(mu_);
  next_mtime_ = seconds;
}

Result<ObjectInfo> MemoryObjectStore::head(std::string_view key) {
  count(StoreOp::kHead);
  LC_RETURN_IF_ERROR(check_object_key(key));
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return Status(ErrorCode::kNotFound, "HEAD " + std::string(key) + ": no such object in " + describe());
  return ObjectInfo{std::string(key), it->second.bytes->size(), it->second.etag, it->second.last_modified_s};
}

Result<size_t> MemoryObjectStore::get_range(const RangeRequest& req, std::span<std::byte> out) {
  count(StoreOp::kGetRange);
  LC_RETURN_IF_ERROR(check_object_key(req.key));
  const std::string where = "GET " + req.key + " bytes " + std::to_string(req.offset) + "+" + std::to_string(req.length);
  if (req.length == 0) return Status(ErrorCode::kInvalidArgument, where + ": zero-length range");
  if (out.size() < req.length) return Status(ErrorCode::kInvalidArgument, where + ": output buffer too small");
  std::shared_ptr<const std::string> bytes;
  {
    std::lock_guard lock(mu_);
    auto it = objects_.find(req.key);
    if (it == objects_.end()) return Status(ErrorCode::kNotFound, where + ": no such object in " + describe());
    if (!req.if_match.empty() && req.if_match != it->second.etag) {
      return Status(ErrorCode::kPreconditionFailed,
                    where + ": object changed (ETag " + it->second.etag + ", expected " + req.if_match + ")");
    }
    bytes = it->second.bytes;
  }
  if (req.offset > bytes->size()) {
    return Status(ErrorCode::kInvalidArgument, where + ": range starts past the end (size " + std::to_string(bytes->size()) + ")");
  }
  size_t n = static_cast<size_t>(std::min<uint64_t>(req.length, bytes->size() - req.offset));
  if (n) std::memcpy(out.data(), bytes->data() + req.offset, n);
  return n;
}

Result<ObjectInfo> MemoryObjectStore::put(std::string_view key, const BodyReader& body, const PutOptions& opts) {
  count(StoreOp::kPut);
  LC_RETURN_IF_ERROR(check_object_key(key));
  if (opts.create_only && contains(key)) {
    return Status(ErrorCode::kAlreadyExists, "PUT " + std::string(key) + ": already exists in " + describe());
  }
  // The body is read fully before anything becomes visible: a failing reader leaves no object.
  std::string bytes;
  std::vector<std::byte> buf(64 * 1024);
  for (;;) {
    auto n = body(buf);
    if (!n.ok()) return n.error().with_context("PUT " + std::string(key) + ": reading body");
    if (*n == 0) break;
    if (*n > buf.size()) return Status(ErrorCode::kInternal, "PUT " + std::string(key) + ": body reader overran its buffer");
    bytes.append(reinterpret_cast<const char*>(buf.data()), *n);
  }
  std::lock_guard lock(mu_);
  // Checked again under the lock: two racing create-only puts must not both win.
  if (opts.create_only && objects_.count(key)) {
    return Status(ErrorCode::kAlreadyExists, "PUT " + std::string(key) + ": already exists in " + describe());
  }
  return store_locked(key, std::move(bytes));
}

Result<ListPage> MemoryObjectStore::list(std::string_view prefix, std::string_view continuation) {
  count(StoreOp::kList);
  std::lock_guard lock(mu_);
  ListPage page;
  // The continuation token is the last key of the previous page, so paging survives puts and
  // removes between calls (ListObjectsV2's start-after semantics).
  auto it = continuation.empty() ? objects_.lower_bound(prefix) : objects_.upper_bound(continuation);
  for (; it != objects_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) {
      if (it->first > prefix) break;
      continue;
    }
    if (page.objects.size() == config_.list_page_size) {
      page.next_continuation = page.objects.back().key;
      break;
    }
    page.objects.push_back(ObjectInfo{it->first, it->second.bytes->size(), it->second.etag, it->second.last_modified_s});
  }
  return page;
}

Status MemoryObjectStore::remove(std::string_view key) {
  count(StoreOp::kRemove);
  LC_RETURN_IF_ERROR(check_object_key(key));
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it != objects_.end()) objects_.erase(it);
  return Status();
}

}  // namespace lazycache::remote::testing
