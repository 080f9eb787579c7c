// SPDX-License-Identifier: MIT
// S3ObjectStore::start_upload: a multipart upload whose parts are sent (UploadPart) or copied by
// the server from a range of another object (UploadPartCopy), for saves that keep most of an
// earlier archive. Support per server: docs/stores.md, "Copying unchanged ranges".
#include <ctime>

#include "remote/s3_object_store.h"
#include "remote/sigv4.h"

namespace lazycache::remote {

class S3Upload final : public MultipartUpload {
 public:
  S3Upload(S3ObjectStore& store, std::string key, std::string upload_id, bool create_only)
      : store_(store), key_(std::move(key)), fkey_(store.full_key(key_)), upload_id_(std::move(upload_id)), create_only_(create_only) {}
  ~S3Upload() override {
    if (!completed_) (void)store_.abort_multipart_upload(key_, upload_id_);
  }
  S3Upload(const S3Upload&) = delete;
  S3Upload& operator=(const S3Upload&) = delete;

  uint64_t min_part_bytes() const override { return 5ull << 20; }
  uint64_t max_part_bytes() const override { return 5ull << 30; }

  Status upload_part(int number, std::span<const std::byte> bytes) override {
    LC_RETURN_IF_ERROR(next_part(number));
    S3ObjectStore::Part part{number, std::vector<std::byte>(bytes.begin(), bytes.end())};
    LC_ASSIGN_OR_RETURN(std::string etag, store_.upload_part(fkey_, upload_id_, part));
    etags_.push_back(std::move(etag));
    total_ += bytes.size();
    return Status();
  }

  Status copy_part(int number, const RangeRequest& source) override {
    LC_RETURN_IF_ERROR(next_part(number));
    LC_RETURN_IF_ERROR(check_object_key(source.key));
    if (source.length == 0) return Status(ErrorCode::kInvalidArgument, "copying an empty range of " + source.key);
    LC_ASSIGN_OR_RETURN(std::string etag, store_.upload_part_copy(key_, upload_id_, number, source));
    etags_.push_back(std::move(etag));
    total_ += source.length;
    return Status();
  }

  Result<ObjectInfo> complete() override {
    completed_ = true;  // finish_multipart aborts the upload itself when it fails
    return store_.finish_multipart(key_, upload_id_, etags_, create_only_, total_);
  }

 private:
  Status next_part(int number) {
    if (completed_) return Status(ErrorCode::kInvalidArgument, "the upload of " + key_ + " is already completed");
    if (number != static_cast<int>(etags_.size()) + 1 || number > static_cast<int>(kMaxParts))
      return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(number) + " of " + key_ + " sent out of order");
    return Status();
  }

  S3ObjectStore& store_;
  std::string key_, fkey_, upload_id_;
  bool create_only_;
  bool completed_ = false;
  std::vector<std::string> etags_;
  uint64_t total_ = 0;
};

Result<std::unique_ptr<MultipartUpload>> S3ObjectStore::start_upload(std::string_view key, const PutOptions& opts) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  if (opts.create_only) LC_RETURN_IF_ERROR(check_absent(key));
  LC_ASSIGN_OR_RETURN(std::string upload_id, initiate_multipart(full_key(key), what("multipart PUT", key)));
  return std::unique_ptr<MultipartUpload>(new S3Upload(*this, std::string(key), std::move(upload_id), opts.create_only));
}

Result<std::string> S3ObjectStore::upload_part_copy(const std::string& key, const std::string& upload_id, int number,
                                                    const RangeRequest& source) {
  const std::string w = "copying bytes " + std::to_string(source.offset) + "-" + std::to_string(source.offset + source.length - 1) +
                        " of " + describe() + "/" + source.key + " as part " + std::to_string(number) + " of " + describe() + "/" + key;
  auto copy = [&](bool conditional) -> Result<std::string> {
    std::string etag;
    Status s = part_retry_.run(w, [&]() -> Status {
      HttpRequest req;
      req.headers.emplace_back("x-amz-copy-source", "/" + config_.bucket + "/" + uri_encode(full_key(source.key), false));
      req.headers.emplace_back("x-amz-copy-source-range",
                               "bytes=" + std::to_string(source.offset) + "-" + std::to_string(source.offset + source.length - 1));
      if (conditional) req.headers.emplace_back("x-amz-copy-source-if-match", source.if_match);
      LC_ASSIGN_OR_RETURN(HttpResponse r,
                          send("PUT", full_key(key), {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}}, req, w));
      // Like Complete, a copy may answer 200 and report its failure in the body.
      if (r.status == 200 && r.body.find("<Error>") != std::string::npos) r.status = 500;
      if (r.status == 412)
        return Status(ErrorCode::kPreconditionFailed,
                      w + ": the source object was replaced (its ETag is no longer " + source.if_match + ")");
      if (r.status == 404) return Status(ErrorCode::kNotFound, w + ": no such object or upload");
      if (r.status != 200) return status_from_http(r, w);
      etag = xml_value(r.body, "ETag");
      if (etag.empty()) return Status(ErrorCode::kCorrupt, w + ": no ETag in the reply");
      return Status();
    });
    if (!s.ok()) return s;
    return etag;
  };
  auto same_source = [&]() -> Result<bool> {
    LC_ASSIGN_OR_RETURN(ObjectInfo now, head(source.key));
    return now.etag == source.if_match;
  };
  if (source.if_match.empty()) return copy(false);
  auto copied = copy(!copy_if_match_broken_.load());
  if (!copied.ok() && copied.error().code() == ErrorCode::kPreconditionFailed && !copy_if_match_broken_.load()) {
    // Swift's s3api compares x-amz-copy-source-if-match with its own ETag of a multipart
    // object, not the S3 one it reports: 412 for an object that did not change. Told apart by a
    // HEAD; such a server is remembered and pinned by the HEAD below alone.
    LC_ASSIGN_OR_RETURN(bool same, same_source());
    if (!same) return copied;
    copy_if_match_broken_ = true;
    copied = copy(false);
  }
  if (!copied.ok()) return copied;
  // And a HEAD after every copy, for servers that ignore the condition (s3rver copies a replaced
  // object): objects are replaced whole, so the same ETag after the copy means the bytes copied
  // were that object's (short of it being replaced and put back as it was: the same bytes).
  LC_ASSIGN_OR_RETURN(bool same, same_source());
  if (!same)
    return Status(ErrorCode::kPreconditionFailed, w + ": the source object was replaced (its ETag is no longer " + source.if_match + ")");
  return copied;
}

}  // namespace lazycache::remote
