// SPDX-License-Identifier: MIT
#include "remote/http_object_store.h"

#include "remote/ranged_get.h"
#include "remote/sigv4.h"

namespace lazycache::remote {

HttpObjectStore::HttpObjectStore(std::string base, std::string presigned_query, TransferConfig transfer)
    : base_(std::move(base)), shown_(redact_url(base_)), query_(std::move(presigned_query)), http_(transfer) {}

std::string HttpObjectStore::url_of(std::string_view key) const {
  if (!query_.empty()) return base_ + "?" + query_;
  return base_ + "/" + uri_encode(key, false);
}

Result<HttpResponse> HttpObjectStore::send(HttpRequest& req, const std::string& what) { return http_.perform(req, what); }

Result<ObjectInfo> HttpObjectStore::head(std::string_view key) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  std::string what = "GET " + shown_ + "/" + std::string(key);
  std::byte one[1];
  HttpRequest req;
  req.url = url_of(key);
  req.headers.emplace_back("Range", "bytes=0-0");
  req.sink = one;
  // A server that ignores this Range (s3rver takes "bytes=0-0" as no range) answers 200 with the
  // whole object: its headers hold the size, so the transfer stops after the first byte. No
  // HEAD: a presigned URL is valid for GET only. Only a 200 without a length asks for HEAD.
  req.overflow_ok = true;
  auto r = http_.perform(req, what);
  if (r.ok() && r->status == 200 && r->header("content-length").empty() && r->header("content-range").empty()) {
    HttpRequest head_req;
    head_req.method = "HEAD";
    head_req.url = url_of(key);
    what = "HEAD " + shown_ + "/" + std::string(key);  // errors name the request really sent
    r = http_.perform(head_req, what);
  }
  if (!r.ok()) return r.error();
  if (r->status == 404) return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " at " + shown_);
  if (r->status == 416) {
    ObjectInfo empty = object_info_from(*r, key);
    empty.size = 0;
    return empty;
  }
  if (r->status != 200 && r->status != 206) return status_from_http(*r, what);
  return object_info_from(*r, key);
}

Result<size_t> HttpObjectStore::get_range(const RangeRequest& req, std::span<std::byte> out) {
  LC_RETURN_IF_ERROR(check_object_key(req.key));
  HttpSender s = [this](HttpRequest& r, const std::string& w) { return send(r, w); };
  auto got = checked_range_get(s, url_of(req.key), req, out, "GET " + shown_ + "/" + req.key);
  if (!got.ok() && got.error().code() == ErrorCode::kNotFound)
    return Status(ErrorCode::kNotFound, "no object " + req.key + " at " + shown_);
  return got;
}

Result<TailRead> HttpObjectStore::get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  if (!suffix_broken_.load()) {
    HttpSender s = [this](HttpRequest& r, const std::string& w) { return send(r, w); };
    auto tail = checked_suffix_get(s, url_of(key), key, length, out, "GET tail of " + shown_ + "/" + std::string(key));
    if (!tail.ok()) {
      if (tail.error().code() == ErrorCode::kNotFound)
        return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " at " + shown_);
      return tail.error();
    }
    if (*tail) return **tail;
    suffix_broken_ = true;
  }
  return ObjectStore::get_tail(key, length, out);
}

Result<ObjectInfo> HttpObjectStore::put(std::string_view key, const BodyReader&, const PutOptions&) {
  return Status(ErrorCode::kUnsupported, shown_ + " is a read-only HTTP store: cannot write " + std::string(key));
}

Result<ListPage> HttpObjectStore::list(std::string_view prefix, std::string_view) {
  return Status(ErrorCode::kUnsupported, shown_ + " is an HTTP store: it cannot list '" + std::string(prefix) +
                                             "*' (use an exact --key, or an s3:// URL for --restore-keys)");
}

Status HttpObjectStore::remove(std::string_view key) {
  return Status(ErrorCode::kUnsupported, shown_ + " is a read-only HTTP store: cannot delete " + std::string(key));
}

}  // namespace lazycache::remote
