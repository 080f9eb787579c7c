// SPDX-License-Identifier: MIT
// File: remote/http_object_store.h -- HttpObjectStore: read-only objects from any HTTP(S) server
// that honours Range (a CDN, nginx, a bucket's public URL, a presigned URL).
//
// Object URL: base + "/" + key (URI-encoded), or, for a presigned URL (the store URL has a
// query), that one URL whatever the key: the signature covers the path. head() is a GET of
// bytes=0-0 (a presigned GET URL is not valid for HEAD); size comes from Content-Range. Reads
// are pinned with If-Match when the server sends an ETag (without one they are unpinned).
// put/list/remove: kUnsupported. Thread-safe; blocking.
#pragma once

#include <atomic>
#include <string>

#include "remote/http_client.h"
#include "remote/object_store.h"
#include "remote/store_url.h"

namespace lazycache::remote {

class HttpObjectStore final : public ObjectStore {
 public:
  HttpObjectStore(std::string base, std::string presigned_query, TransferConfig transfer = {});

  Result<ObjectInfo> head(std::string_view key) override;
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override;
  Result<TailRead> get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) override;
  Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) override;
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override;
  Status remove(std::string_view key) override;
  std::string describe() const override { return shown_; }
  TransferStats transfer_stats() const override { return TransferStats{http_.requests(), http_.max_in_flight(), 0}; }
  const HttpClient& http() const { return http_; }

 private:
  std::string url_of(std::string_view key) const;
  Result<HttpResponse> send(HttpRequest& req, const std::string& what);
  std::string base_;   // may carry userinfo: only in request URLs
  std::string shown_;  // base_ for messages (redact_url)
  std::string query_;
  HttpClient http_;
  std::atomic<bool> suffix_broken_{false};
};

}  // namespace lazycache::remote
