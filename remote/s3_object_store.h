// SPDX-License-Identifier: MIT
// File: remote/s3_object_store.h -- S3ObjectStore: S3 and compatible servers (AWS, R2, GCS XML,
// MinIO, Ceph, Swift s3api, s3rver) with our own SigV4 signer (remote/sigv4.h).
//
//  - Addressing: path-style (endpoint/bucket/key) or virtual-hosted (bucket.endpoint/key).
//  - Payload: UNSIGNED-PAYLOAD by default (integrity comes from the archive's own checksums),
//    or the body's SHA-256 (sign_payload), which strict servers verify.
//  - Reads: ranged GETs pinned with If-Match; get_tail uses one suffix-range GET and remembers a
//    server that answers suffix ranges wrongly (then HEAD + absolute range).
//  - put: one PUT up to one part, else a multipart upload whose parts are read from the body in
//    the calling thread and uploaded by `concurrency` threads, so compression and upload overlap
//    and at most concurrency + 1 parts are in memory. Each part is retried (RetryPolicy); any
//    failure aborts the upload (AbortMultipartUpload), so none is left behind.
//  - create_only: HEAD first (skip the upload when the key exists), HEAD again just before the
//    PUT or CompleteMultipartUpload (an entry that appeared meanwhile aborts the upload:
//    kAlreadyExists), and If-None-Match: * on that request. A server answering 501 to the header
//    (Swift) is remembered; there, and on servers that ignore it (s3rver), the second HEAD is the
//    only guard, which leaves the window of one round trip that docs/stores.md states.
//  - A 403 ExpiredToken / InvalidAccessKeyId / InvalidToken reloads the credentials and, if they
//    changed, resends the request once.
// Thread-safe; blocking.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "remote/aws_config.h"
#include "remote/http_client.h"
#include "remote/object_store.h"
#include "remote/ranged_get.h"
#include "remote/retrying_object_store.h"
#include "remote/store_url.h"
#include "remote/transfer_config.h"

namespace lazycache::remote {

struct S3Config {
  HttpEndpoint endpoint;  // e.g. {"https", "s3.us-east-1.amazonaws.com"}
  std::string bucket;
  std::string prefix;  // key prefix without leading/trailing '/', may be empty
  std::string region = "us-east-1";
  bool path_style = true;
  bool sign_payload = false;
  TransferConfig transfer;
  RetryConfig part_retry;     // for multipart parts (a part is replayable from memory)
  int list_page_size = 1000;  // max-keys
  // Added to this machine's clock when signing: servers reject > 15 min of skew. Tests use it
  // to prove that a skewed request is rejected and reported clearly.
  int64_t clock_offset_s = 0;
};

struct MultipartUploadInfo {
  std::string key;  // relative to the store's prefix
  std::string upload_id;
};

class S3ObjectStore final : public ObjectStore {
 public:
  // Whether copies to this endpoint skip x-amz-copy-source-if-match (Swift s3api answers 412
  // for an unchanged multipart source: docs/stores.md): true once a copy of any S3ObjectStore of
  // this process on the same endpoint (scheme and host) found the quirk, checked by a HEAD.
  // Such copies are pinned by the HEAD after them (check_copy_source) alone.
  bool copy_if_match_known_broken() const;
  S3ObjectStore(S3Config config, std::shared_ptr<CredentialSource> credentials);

  Result<ObjectInfo> head(std::string_view key) override;
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override;
  Result<TailRead> get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) override;
  Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) override;
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override;
  Status remove(std::string_view key) override;
  std::string describe() const override;
  TransferStats transfer_stats() const override { return TransferStats{http_.requests(), http_.max_in_flight(), part_retry_.retries()}; }
  // CreateMultipartUpload (create-only: beside the HEAD of the key); parts are UploadPart or
  // UploadPartCopy (x-amz-copy-source-range; copy_part pinned with x-amz-copy-source-if-match,
  // copy_part_unchecked by the HEAD of complete_checking); complete() as put's multipart path
  // (create_only checks included); an upload destroyed uncompleted is aborted.
  // s3_upload_part_copy.cpp.
  Result<std::unique_ptr<MultipartUpload>> start_upload(std::string_view key, const PutOptions& opts) override;

  // Multipart uploads in progress under prefix (ListMultipartUploads): tests check that failed
  // saves leave none behind. Errors: kUnsupported where the server lacks it (s3rver).
  Result<std::vector<MultipartUploadInfo>> list_multipart_uploads(std::string_view prefix);
  Status abort_multipart_upload(std::string_view key, const std::string& upload_id);
  const HttpClient& http() const { return http_; }
  bool suffix_ranges_broken() const { return suffix_broken_.load(); }

 private:
  friend class S3Upload;
  struct Part {
    int number = 0;
    std::vector<std::byte> bytes;
  };
  std::string full_key(std::string_view key) const;
  // Builds, signs and sends one request on the object full_key ("" = the bucket).
  Result<HttpResponse> send(const std::string& method, const std::string& full_key,
                            const std::vector<std::pair<std::string, std::string>>& query, HttpRequest& request, const std::string& what);
  Result<HttpResponse> send_once(const std::string& method, const std::string& full_key,
                                 const std::vector<std::pair<std::string, std::string>>& query, HttpRequest& request,
                                 const std::string& what, const AwsCredentials& creds);
  HttpSender sender_for(const std::string& full_key);
  // OK when key does not exist; kAlreadyExists when it does; else the HEAD's error.
  Status check_absent(std::string_view key);
  Result<ObjectInfo> put_single(std::string_view key, std::span<const std::byte> body, bool create_only);
  Result<ObjectInfo> put_multipart(std::string_view key, Part first, const BodyReader& body, const PutOptions& opts,
                                   const UploadPlan& plan);
  Result<std::string> upload_part(const std::string& fkey, const std::string& upload_id, const Part& part);
  // The upload id of a new multipart upload of fkey.
  Result<std::string> initiate_multipart(const std::string& fkey, const std::string& what);
  // UploadPartCopy into the upload of `key`: the part's ETag. Pinned with
  // x-amz-copy-source-if-match (where the server can match a multipart ETag there: not Swift)
  // and, by the caller, with check_copy_source() after the copies (s3rver ignores the condition).
  // Thread-safe: S3Upload::copy_parts runs several at once.
  Result<std::string> copy_part_request(const std::string& key, const std::string& upload_id, int number, const RangeRequest& source);
  // kPreconditionFailed unless `source.key` still has ETag `source.if_match` (a HEAD).
  Status check_copy_source(const RangeRequest& source, const std::string& what);
  std::string copy_what(const std::string& key, int number, const RangeRequest& source) const;
  // Completes the upload of parts 1..etags.size() (create_only: HEAD first unless the caller
  // made it (`absent_checked`), If-None-Match where the server honours it) or aborts it on any
  // failure.
  Result<ObjectInfo> finish_multipart(std::string_view key, const std::string& upload_id, const std::vector<std::string>& etags,
                                      bool create_only, uint64_t total, bool absent_checked = false);
  Result<HttpResponse> complete_multipart(const std::string& fkey, const std::string& upload_id, const std::vector<std::string>& etags,
                                          bool if_none_match);
  std::string what(const char* op, std::string_view key) const;

  S3Config config_;
  std::shared_ptr<CredentialSource> credentials_;
  HttpClient http_;
  RetryPolicy part_retry_;
  std::atomic<bool> suffix_broken_{false};
  std::atomic<bool> conditional_put_unsupported_{false};
  // Swift's x-amz-copy-source-if-match quirk (copy_part_request), known for this endpoint:
  // found by a copy of this store, or by any store of this process on the same endpoint
  // (if_match_quirk_endpoints() in s3_upload_part_copy.cpp), so it is probed once per process.
  std::atomic<bool> copy_if_match_broken_{false};
};

}  // namespace lazycache::remote
