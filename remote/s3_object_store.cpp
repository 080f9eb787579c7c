// SPDX-License-Identifier: MIT
#include "remote/s3_object_store.h"

#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

#include "remote/ranged_get.h"
#include "remote/sigv4.h"

namespace lazycache::remote {

// Every entry is a zstd stream (seekable zstd around a tar): the same type on every upload path.
constexpr const char* kArchiveContentType = "application/zstd";
namespace {

using Query = std::vector<std::pair<std::string, std::string>>;

bool credentials_rejected(const HttpResponse& r) {
  if (r.status != 403 && r.status != 400) return false;
  std::string code = xml_value(r.body, "Code");
  return code == "ExpiredToken" || code == "InvalidAccessKeyId" || code == "InvalidToken" || code == "TokenRefreshRequired";
}

// Reads from body until buf is full or the body ends. Returns the count.
Result<size_t> fill(const BodyReader& body, std::vector<std::byte>& buf) {
  size_t got = 0;
  while (got < buf.size()) {
    LC_ASSIGN_OR_RETURN(size_t n, body(std::span<std::byte>(buf).subspan(got)));
    if (n == 0) break;
    got += n;
  }
  return got;
}

// Text content for XML: quotes may stay raw inside element text (ETags are quoted).
std::string xml_text(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

S3ObjectStore::S3ObjectStore(S3Config config, std::shared_ptr<CredentialSource> credentials)
    : config_(std::move(config)), credentials_(std::move(credentials)), http_(config_.transfer), part_retry_(config_.part_retry) {}

std::string S3ObjectStore::describe() const { return "s3://" + config_.bucket + (config_.prefix.empty() ? "" : "/" + config_.prefix); }

std::string S3ObjectStore::what(const char* op, std::string_view key) const {
  return std::string(op) + " " + describe() + "/" + std::string(key);
}

std::string S3ObjectStore::full_key(std::string_view key) const {
  return config_.prefix.empty() ? std::string(key) : config_.prefix + "/" + std::string(key);
}

Result<HttpResponse> S3ObjectStore::send_once(const std::string& method, const std::string& fkey, const Query& query, HttpRequest& request,
                                              const std::string& what_text, const AwsCredentials& creds) {
  std::string host = config_.path_style ? config_.endpoint.host : config_.bucket + "." + config_.endpoint.host;
  std::string path = config_.path_style ? "/" + config_.bucket : "";
  if (!fkey.empty()) path += "/" + uri_encode(fkey, false);
  if (path.empty()) path = "/";
  std::string qs = canonical_query(query);
  request.method = method;
  request.url = config_.endpoint.scheme + "://" + host + path + (qs.empty() ? "" : "?" + qs);

  SignRequest sign;
  sign.method = method;
  sign.path = path;
  sign.query = query;
  sign.region = config_.region;
  sign.amz_date = amz_date(static_cast<int64_t>(std::time(nullptr)) + config_.clock_offset_s);
  if (request.body.empty()) sign.payload_hash = std::string(kEmptyPayloadHash);
  else if (config_.sign_payload)
    sign.payload_hash = sha256_hex(std::string_view(reinterpret_cast<const char*>(request.body.data()), request.body.size()));
  else sign.payload_hash = std::string(kUnsignedPayload);
  sign.headers = request.headers;  // Range, If-Match, If-None-Match ... are signed too
  sign.headers.emplace_back("host", host);
  sign.headers.emplace_back("x-amz-date", sign.amz_date);
  sign.headers.emplace_back("x-amz-content-sha256", sign.payload_hash);
  if (!creds.session_token.empty()) sign.headers.emplace_back("x-amz-security-token", creds.session_token);

  HttpRequest signed_request = request;
  signed_request.headers = sign.headers;
  // curl sets Host itself from the URL; sending ours too would duplicate it.
  std::erase_if(signed_request.headers, [](const auto& h) { return h.first == "host"; });
  signed_request.headers.emplace_back("Authorization", authorization_header(sign, creds));
  return http_.perform(signed_request, what_text);
}

Result<HttpResponse> S3ObjectStore::send(const std::string& method, const std::string& fkey, const Query& query, HttpRequest& request,
                                         const std::string& what_text) {
  auto creds = credentials_->current();
  if (!creds.ok()) return creds.error().with_context(what_text);
  LC_ASSIGN_OR_RETURN(HttpResponse r, send_once(method, fkey, query, request, what_text, *creds));
  if (credentials_rejected(r)) {
    // Rotated or refreshed credentials: resend once with the new ones. Compare with what this
    // request was signed with, not with reload()'s answer: a concurrent request may have reloaded
    // the new credentials first, and this one must still be resent with them.
    (void)credentials_->reload();
    auto fresh = credentials_->current();
    if (!fresh.ok()) return fresh.error().with_context(what_text);
    if (fresh->access_key_id != creds->access_key_id || fresh->secret_access_key != creds->secret_access_key ||
        fresh->session_token != creds->session_token)
      return send_once(method, fkey, query, request, what_text, *fresh);
  }
  return r;
}

HttpSender S3ObjectStore::sender_for(const std::string& fkey) {
  return [this, fkey](HttpRequest& req, const std::string& w) { return send("GET", fkey, {}, req, w); };
}

Result<ObjectInfo> S3ObjectStore::head(std::string_view key) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  HttpRequest req;
  std::string w = what("HEAD", key);
  LC_ASSIGN_OR_RETURN(HttpResponse r, send("HEAD", full_key(key), {}, req, w));
  if (r.status == 404) return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " in " + describe());
  if (r.status != 200) return status_from_http(r, w);
  return object_info_from(r, key);
}

Result<size_t> S3ObjectStore::get_range(const RangeRequest& req, std::span<std::byte> out) {
  LC_RETURN_IF_ERROR(check_object_key(req.key));
  auto got = checked_range_get(sender_for(full_key(req.key)), "", req, out, what("GET", req.key));
  if (!got.ok() && got.error().code() == ErrorCode::kNotFound)
    return Status(ErrorCode::kNotFound, "no object " + req.key + " in " + describe());
  return got;
}

Result<TailRead> S3ObjectStore::get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  if (!suffix_broken_.load()) {
    auto tail = checked_suffix_get(sender_for(full_key(key)), "", key, length, out, what("GET tail of", key));
    if (!tail.ok()) {
      if (tail.error().code() == ErrorCode::kNotFound)
        return Status(ErrorCode::kNotFound, "no object " + std::string(key) + " in " + describe());
      return tail.error();
    }
    if (*tail) return **tail;
    suffix_broken_ = true;  // e.g. s3rver: bytes=-N gives the first bytes; never ask again
  }
  return ObjectStore::get_tail(key, length, out);
}

Status S3ObjectStore::check_absent(std::string_view key) {
  auto exists = head(key);
  if (exists.ok()) return Status(ErrorCode::kAlreadyExists, "object " + std::string(key) + " already exists in " + describe());
  if (exists.error().code() != ErrorCode::kNotFound) return exists.error();
  return Status();
}

Result<ObjectInfo> S3ObjectStore::put_single(std::string_view key, std::span<const std::byte> body, bool create_only) {
  std::string w = what("PUT", key);
  // Servers that ignore If-None-Match (s3rver) or refuse it (Swift) would let this PUT replace an
  // entry published while the body was being packed: look again right before sending.
  if (create_only) LC_RETURN_IF_ERROR(check_absent(key));
  for (;;) {
    bool conditional = create_only && !conditional_put_unsupported_.load();
    HttpResponse r;
    Status s = part_retry_.run(w, [&]() -> Status {
      HttpRequest req;
      req.body = body;
      req.headers.emplace_back("content-type", kArchiveContentType);
      if (conditional) req.headers.emplace_back("If-None-Match", "*");
      auto sent = send("PUT", full_key(key), {}, req, w);
      if (!sent.ok()) return sent.error();
      r = std::move(*sent);
      if (r.status >= 500 && r.status != 501) return status_from_http(r, w);  // retryable
      if (r.status == 429 || r.status == 408) return status_from_http(r, w);
      return Status();
    });
    if (!s.ok()) return s;
    if (r.status == 200) {
      ObjectInfo info{std::string(key), body.size(), r.header("etag"), static_cast<int64_t>(std::time(nullptr))};
      return info;
    }
    if (r.status == 412 || (r.status == 409 && create_only))
      return Status(ErrorCode::kAlreadyExists, "object " + std::string(key) + " already exists in " + describe());
    if (conditional && (r.status == 501 || r.status == 400)) {
      // Swift answers 501 NotImplemented to If-None-Match on PUT: remember, rely on the HEAD
      // check done before the upload, and send the PUT plainly.
      conditional_put_unsupported_ = true;
      continue;
    }
    return status_from_http(r, w);
  }
}

Result<std::string> S3ObjectStore::upload_part(const std::string& fkey, const std::string& upload_id, const Part& part) {
  std::string w = "PUT part " + std::to_string(part.number) + " of " + describe() + "/" + fkey;
  std::string etag;
  Status s = part_retry_.run(w, [&]() -> Status {
    HttpRequest req;
    req.body = part.bytes;
    LC_ASSIGN_OR_RETURN(HttpResponse r, send("PUT", fkey, {{"partNumber", std::to_string(part.number)}, {"uploadId", upload_id}}, req, w));
    if (r.status != 200) return status_from_http(r, w);
    etag = r.header("etag");
    if (etag.empty()) return Status(ErrorCode::kCorrupt, w + ": no ETag in the reply");
    return Status();
  });
  if (!s.ok()) return s;
  return etag;
}

Result<HttpResponse> S3ObjectStore::complete_multipart(const std::string& fkey, const std::string& upload_id,
                                                       const std::vector<std::string>& etags, bool if_none_match) {
  std::string xml = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < etags.size(); ++i)
    xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + xml_text(etags[i]) + "</ETag></Part>";
  xml += "</CompleteMultipartUpload>";
  std::string w = "completing the upload of " + describe() + "/" + fkey;
  HttpResponse out;
  Status s = part_retry_.run(w, [&]() -> Status {
    HttpRequest req;
    req.body = std::as_bytes(std::span<const char>(xml));
    if (if_none_match) req.headers.emplace_back("If-None-Match", "*");
    LC_ASSIGN_OR_RETURN(out, send("POST", fkey, {{"uploadId", upload_id}}, req, w));
    // S3 may answer 200 and put an error in the body after a long Complete.
    if (out.status == 200 && out.body.find("<Error>") != std::string::npos) {
      out.status = 500;
      return status_from_http(out, w);
    }
    if (out.status >= 500 && out.status != 501) return status_from_http(out, w);
    return Status();
  });
  if (!s.ok()) return s;
  return out;
}

Status S3ObjectStore::abort_multipart_upload(std::string_view key, const std::string& upload_id) {
  std::string fkey = full_key(key);
  std::string w = "aborting the upload of " + describe() + "/" + std::string(key);
  return part_retry_.run(w, [&]() -> Status {
    HttpRequest req;
    LC_ASSIGN_OR_RETURN(HttpResponse r, send("DELETE", fkey, {{"uploadId", upload_id}}, req, w));
    if (r.status == 204 || r.status == 200 || r.status == 404) return Status();
    return status_from_http(r, w);
  });
}

Result<ObjectInfo> S3ObjectStore::put_multipart(std::string_view key, Part first, const BodyReader& body, const PutOptions& opts,
                                                const UploadPlan& plan) {
  std::string fkey = full_key(key);
  std::string w = what("multipart PUT", key);
  LC_ASSIGN_OR_RETURN(std::string upload_id, initiate_multipart(fkey, w));

  // Producer (this thread) reads parts; `plan.concurrency` workers upload them.
  std::mutex mu;  // guards everything below until the workers are joined
  std::condition_variable cv;
  std::deque<Part> queue;
  std::vector<std::string> etags;
  size_t parts_alive = 1;  // parts in memory: queued, uploading, or being filled
  bool reading_done = false;
  Status error;
  uint64_t total = first.bytes.size();
  etags.resize(1);
  queue.push_back(std::move(first));

  auto worker = [&] {
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return !queue.empty() || reading_done || !error.ok(); });
      if (!error.ok() || queue.empty()) return;
      Part part = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      auto etag = upload_part(fkey, upload_id, part);
      part.bytes = {};
      lock.lock();
      --parts_alive;
      if (etag.ok()) etags[part.number - 1] = *etag;
      else if (error.ok()) error = etag.error();
      cv.notify_all();
    }
  };
  std::vector<std::thread> workers;
  // However the producer leaves (an exception: bad_alloc of a part, a throwing body, no thread
  // to start), the workers are stopped and joined first: a joinable std::thread destroyed by the
  // unwinding would be std::terminate, and a worker waiting for parts would never return.
  auto stop_workers = [&] {
    {
      std::lock_guard lock(mu);
      if (error.ok()) error = Status(ErrorCode::kInternal, w + ": the upload was cancelled");
      reading_done = true;
      cv.notify_all();
    }
    for (auto& t : workers) t.join();
  };
  try {
    for (int i = 0; i < plan.concurrency; ++i) workers.emplace_back(worker);

    for (int number = 2;; ++number) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return parts_alive < static_cast<size_t>(plan.concurrency) + 1 || !error.ok(); });
        if (!error.ok()) break;
        ++parts_alive;
      }
      Part part{number, std::vector<std::byte>(plan.part_size_bytes)};
      auto n = fill(body, part.bytes);
      std::lock_guard lock(mu);
      if (!n.ok() || *n == 0 || number > static_cast<int>(kMaxParts)) {
        --parts_alive;
        if (!n.ok()) error = n.error().with_context(w + ": reading the body");
        else if (*n != 0)
          error = Status(ErrorCode::kResourceExhausted,
                         w + ": more than 10,000 parts of " + std::to_string(plan.part_size_bytes) + " bytes; use a larger --part-size");
        break;
      }
      part.bytes.resize(*n);
      total += *n;
      etags.resize(number);
      queue.push_back(std::move(part));
      cv.notify_all();
      if (*n < plan.part_size_bytes) break;  // the body ended inside this part
    }
  } catch (...) {
    stop_workers();
    ignore_error(abort_multipart_upload(key, upload_id), "the store's lifecycle rule removes a pending upload");
    throw;
  }
  {
    std::lock_guard lock(mu);
    reading_done = true;
    cv.notify_all();
  }
  for (auto& t : workers) t.join();

  if (!error.ok()) {
    Status aborted = abort_multipart_upload(key, upload_id);
    if (!aborted.ok()) return error.with_context("upload failed and could not be aborted (" + aborted.message() + ")");
    return error;
  }
  return finish_multipart(key, upload_id, etags, opts.create_only, total);
}

Result<std::string> S3ObjectStore::initiate_multipart(const std::string& fkey, const std::string& w) {
  HttpResponse r;
  Status s = part_retry_.run(w, [&]() -> Status {
    HttpRequest req;
    req.headers.emplace_back("content-type", kArchiveContentType);  // the object's type, not the POST's XML
    LC_ASSIGN_OR_RETURN(r, send("POST", fkey, {{"uploads", ""}}, req, w));
    if (r.status != 200) return status_from_http(r, w);
    return Status();
  });
  if (!s.ok()) return s;
  std::string upload_id = xml_value(r.body, "UploadId");
  if (upload_id.empty()) return Status(ErrorCode::kCorrupt, w + ": no UploadId in the reply");
  return upload_id;
}

Result<ObjectInfo> S3ObjectStore::finish_multipart(std::string_view key, const std::string& upload_id,
                                                   const std::vector<std::string>& etags, bool create_only, uint64_t total,
                                                   bool absent_checked) {
  const std::string fkey = full_key(key);
  const std::string w = what("multipart PUT", key);
  auto fail = [&](Status s) -> Status {
    Status aborted = abort_multipart_upload(key, upload_id);
    if (!aborted.ok()) return s.with_context("upload failed and could not be aborted (" + aborted.message() + ")");
    return s;
  };
  if (create_only && !absent_checked) {
    Status still_free = check_absent(key);
    if (!still_free.ok()) return fail(still_free);
  }
  bool conditional = create_only && !conditional_put_unsupported_.load();
  auto done = complete_multipart(fkey, upload_id, etags, conditional);
  if (!done.ok()) return fail(done.error());
  if (conditional && (done->status == 501 || done->status == 400)) {
    conditional_put_unsupported_ = true;  // Swift: the HEAD just above is the guard
    done = complete_multipart(fkey, upload_id, etags, false);
    if (!done.ok()) return fail(done.error());
  }
  if (done->status == 412 || (done->status == 409 && create_only))
    return fail(Status(ErrorCode::kAlreadyExists, "object " + std::string(key) + " already exists in " + describe()));
  if (done->status != 200) return fail(status_from_http(*done, w));
  return ObjectInfo{std::string(key), total, xml_value(done->body, "ETag"), static_cast<int64_t>(std::time(nullptr))};
}

Result<ObjectInfo> S3ObjectStore::put(std::string_view key, const BodyReader& body, const PutOptions& opts) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  TransferConfig t = config_.transfer;
  if (opts.part_size_bytes) t.part_size_bytes = opts.part_size_bytes;
  if (opts.concurrency) t.concurrency = opts.concurrency;
  UploadPlan plan = choose_upload_plan(opts.size_hint_bytes, t);
  if (opts.create_only) {
    // Cheap check first: an existing entry is not uploaded again at all.
    LC_RETURN_IF_ERROR(check_absent(key));
  }
  Part first{1, std::vector<std::byte>(plan.part_size_bytes)};
  LC_ASSIGN_OR_RETURN(size_t n, fill(body, first.bytes));
  if (n < plan.part_size_bytes) {
    first.bytes.resize(n);
    return put_single(key, first.bytes, opts.create_only);
  }
  return put_multipart(key, std::move(first), body, opts, plan);
}

Result<ListPage> S3ObjectStore::list(std::string_view prefix, std::string_view continuation) {
  std::string base = config_.prefix.empty() ? "" : config_.prefix + "/";
  Query q{{"list-type", "2"}, {"prefix", base + std::string(prefix)}, {"max-keys", std::to_string(config_.list_page_size)}};
  if (!continuation.empty()) q.emplace_back("continuation-token", std::string(continuation));
  std::string w = "LIST " + describe() + "/" + std::string(prefix) + "*";
  HttpRequest req;
  LC_ASSIGN_OR_RETURN(HttpResponse r, send("GET", "", q, req, w));
  if (r.status != 200) return status_from_http(r, w);
  ListPage page;
  for (std::string_view c : xml_elements(r.body, "Contents")) {
    std::string full = xml_value(c, "Key");
    if (full.compare(0, base.size(), base) != 0) continue;
    ObjectInfo info;
    info.key = full.substr(base.size());
    info.size = std::strtoull(xml_value(c, "Size").c_str(), nullptr, 10);
    info.etag = xml_value(c, "ETag");
    info.last_modified_s = parse_http_time(xml_value(c, "LastModified"));
    page.objects.push_back(std::move(info));
  }
  if (xml_value(r.body, "IsTruncated") == "true") {
    page.next_continuation = xml_value(r.body, "NextContinuationToken");
    if (page.next_continuation.empty()) return Status(ErrorCode::kCorrupt, w + ": truncated listing without a continuation token");
  }
  return page;
}

Status S3ObjectStore::remove(std::string_view key) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  std::string w = what("DELETE", key);
  HttpRequest req;
  LC_ASSIGN_OR_RETURN(HttpResponse r, send("DELETE", full_key(key), {}, req, w));
  if (r.status == 204 || r.status == 200 || r.status == 404) return Status();
  return status_from_http(r, w);
}

Result<std::vector<MultipartUploadInfo>> S3ObjectStore::list_multipart_uploads(std::string_view prefix) {
  std::string base = config_.prefix.empty() ? "" : config_.prefix + "/";
  std::string w = "listing multipart uploads in " + describe();
  HttpRequest req;
  LC_ASSIGN_OR_RETURN(HttpResponse r, send("GET", "", {{"uploads", ""}, {"prefix", base + std::string(prefix)}}, req, w));
  if (r.status != 200) return status_from_http(r, w);
  std::vector<MultipartUploadInfo> out;
  for (std::string_view u : xml_elements(r.body, "Upload")) {
    std::string full = xml_value(u, "Key");
    if (full.compare(0, base.size(), base) != 0) continue;
    out.push_back(MultipartUploadInfo{full.substr(base.size()), xml_value(u, "UploadId")});
  }
  return out;
}

}  // namespace lazycache::remote
