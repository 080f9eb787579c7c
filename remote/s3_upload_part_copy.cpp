// SPDX-License-Identifier: MIT
// S3ObjectStore::start_upload: a multipart upload whose parts are sent (UploadPart) or copied by
// the server from a range of another object (UploadPartCopy), for saves that keep most of an
// earlier archive. Support per server: docs/stores.md, "Copying unchanged ranges".
#include <ctime>
#include <mutex>
#include <set>
#include <string>

#include "remote/parallel.h"
#include "remote/s3_object_store.h"
#include "remote/sigv4.h"

namespace lazycache::remote {

namespace {

// Endpoints (scheme://host) whose copies answered 412 to x-amz-copy-source-if-match for a source
// a HEAD showed unchanged, for the whole process: every store of a save (and every save of a
// test binary) would otherwise probe again, a failed copy, a HEAD and the copy again (~100 ms
// through a hosted link) before the copies that follow can run at once.
struct IfMatchQuirks {
  std::mutex mu;
  std::set<std::string> endpoints;  // guarded by mu
};
IfMatchQuirks& if_match_quirks() {
  static IfMatchQuirks q;
  return q;
}

}  // namespace

bool S3ObjectStore::copy_if_match_known_broken() const {
  if (copy_if_match_broken_.load()) return true;
  IfMatchQuirks& q = if_match_quirks();
  std::lock_guard lock(q.mu);
  return q.endpoints.count(config_.endpoint.url()) > 0;
}

// Thread-safe as remote/multipart_upload.h allows (parts in any order, from several threads):
// the part table is guarded by mu_; requests run outside it.
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
  bool parts_in_any_order() const override { return true; }

  Status upload_part(int number, std::span<const std::byte> bytes) override {
    LC_RETURN_IF_ERROR(claim(number, 1));
    S3ObjectStore::Part part{number, std::vector<std::byte>(bytes.begin(), bytes.end())};
    auto etag = store_.upload_part(fkey_, upload_id_, part);
    if (!etag.ok()) {
      release(number, 1);
      return etag.error();
    }
    record(number, std::move(etag).value(), bytes.size());
    return Status();
  }

  Status copy_part(int number, const RangeRequest& source) override { return copy_parts(number, {source}, 1); }

  // The copies run concurrently (each its own request); the sources are checked once after all
  // of them (objects are replaced whole: the same ETag then means every copy read that object).
  Status copy_parts(int first_number, const std::vector<RangeRequest>& sources, int concurrency) override {
    if (sources.empty()) return Status();
    for (const RangeRequest& s : sources) {
      LC_RETURN_IF_ERROR(check_object_key(s.key));
      if (s.length == 0) return Status(ErrorCode::kInvalidArgument, "copying an empty range of " + s.key);
    }
    LC_RETURN_IF_ERROR(claim(first_number, sources.size()));
    std::vector<std::string> etags(sources.size());
    Status s = run_bounded(sources.size(), concurrency, [&](size_t i) -> Status {
      LC_ASSIGN_OR_RETURN(etags[i], store_.copy_part_request(key_, upload_id_, first_number + static_cast<int>(i), sources[i]));
      return Status();
    });
    std::set<std::pair<std::string, std::string>> checked;  // (key, etag) pins already checked
    for (size_t i = 0; i < sources.size() && s.ok(); ++i) {
      if (!checked.emplace(sources[i].key, sources[i].if_match).second) continue;
      s = store_.check_copy_source(sources[i], store_.copy_what(key_, first_number + static_cast<int>(i), sources[i]));
    }
    if (!s.ok()) {
      // The numbers are free again (a store that refuses copies gets the bytes sent instead).
      release(first_number, sources.size());
      return s;
    }
    for (size_t i = 0; i < sources.size(); ++i) record(first_number + static_cast<int>(i), std::move(etags[i]), sources[i].length);
    return Status();
  }

  // Sent without x-amz-copy-source-if-match: the HEAD of check_copy_sources() after the copies
  // pins them (objects are replaced whole, so the ETag the index was read with, still there
  // after the last copy, means every copy read that object). The condition would add nothing
  // where a server honours it and costs a refused copy and a HEAD per copy in flight where it
  // does not (Swift answers 412 for an unchanged multipart source): ~0.1-0.2 s of every save
  // through a hosted link, paid again by every process (docs/writable.md, "branch save11").
  Status copy_part_unchecked(int number, const RangeRequest& source) override {
    LC_RETURN_IF_ERROR(check_object_key(source.key));
    if (source.length == 0) return Status(ErrorCode::kInvalidArgument, "copying an empty range of " + source.key);
    LC_RETURN_IF_ERROR(claim(number, 1));
    RangeRequest unpinned = source;
    unpinned.if_match.clear();
    auto etag = store_.copy_part_request(key_, upload_id_, number, unpinned);
    if (!etag.ok()) {
      release(number, 1);  // free again: a store that refuses copies gets the bytes sent instead
      return etag.error();
    }
    record(number, std::move(etag).value(), source.length);
    return Status();
  }

  Status check_copy_sources(const std::vector<RangeRequest>& sources) override {
    std::set<std::pair<std::string, std::string>> checked;  // (key, etag) pins already checked
    for (const RangeRequest& s : sources) {
      if (!checked.emplace(s.key, s.if_match).second) continue;
      LC_RETURN_IF_ERROR(store_.check_copy_source(s, "copying bytes of " + store_.describe() + "/" + s.key + " into " + key_));
    }
    return Status();
  }

  Status discard_part(int number) override {
    std::lock_guard lock(mu_);
    if (completed_) return Status(ErrorCode::kInvalidArgument, "the upload of " + key_ + " is already completed");
    const size_t i = static_cast<size_t>(number - 1);
    if (number < 1 || i >= claimed_.size() || !claimed_[i]) return Status();  // never sent: nothing to leave out
    if (etags_[i].empty())
      return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(number) + " of " + key_ + " is still being sent");
    claimed_[i] = false;
    etags_[i].clear();
    total_ -= bytes_[i];
    bytes_[i] = 0;
    return Status();
  }

  Result<ObjectInfo> complete() override { return finish(false); }

  // The sources' HEADs and, create-only, the HEAD of the new key at once, then the completion.
  Result<ObjectInfo> complete_checking(const std::vector<RangeRequest>& sources) override {
    std::vector<RangeRequest> unique;
    std::set<std::pair<std::string, std::string>> seen;  // (key, etag) pins
    for (const RangeRequest& s : sources)
      if (seen.emplace(s.key, s.if_match).second) unique.push_back(s);
    const size_t checks = unique.size() + (create_only_ ? 1 : 0);
    Status s = run_bounded(checks, static_cast<int>(checks), [&](size_t i) -> Status {
      if (i == unique.size()) return store_.check_absent(key_);
      return store_.check_copy_source(unique[i], "copying bytes of " + store_.describe() + "/" + unique[i].key + " into " + key_);
    });
    if (!s.ok()) return s;  // the upload is aborted when it goes (never completed)
    return finish(true);
  }

 private:
  // `absent_checked`: complete_checking() made the create-only HEAD already.
  Result<ObjectInfo> finish(bool absent_checked) {
    std::vector<std::string> etags;
    uint64_t total = 0;
    {
      std::lock_guard lock(mu_);
      if (completed_) return Status(ErrorCode::kInvalidArgument, "the upload of " + key_ + " is already completed");
      // Discarded parts after the last one sent are left out (discard_part).
      while (!claimed_.empty() && !claimed_.back()) {
        claimed_.pop_back();
        etags_.pop_back();
        bytes_.pop_back();
      }
      for (size_t i = 0; i < etags_.size(); ++i)
        if (etags_[i].empty())
          return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(i + 1) + " of " + key_ + " was not sent");
      completed_ = true;  // finish_multipart aborts the upload itself when it fails
      etags = etags_;
      total = total_;
    }
    return store_.finish_multipart(key_, upload_id_, etags, create_only_, total, absent_checked);
  }

  // Reserves parts [first, first + n): each number once, within S3's 10,000.
  Status claim(int first, size_t n) {
    std::lock_guard lock(mu_);
    if (completed_) return Status(ErrorCode::kInvalidArgument, "the upload of " + key_ + " is already completed");
    if (first < 1 || static_cast<size_t>(first - 1) + n > kMaxParts)
      return Status(ErrorCode::kInvalidArgument,
                    "part " + std::to_string(first) + " of " + key_ + " is outside 1.." + std::to_string(kMaxParts));
    const size_t end = static_cast<size_t>(first - 1) + n;
    if (claimed_.size() < end) {
      claimed_.resize(end, false);
      etags_.resize(end);
      bytes_.resize(end, 0);
    }
    for (size_t i = static_cast<size_t>(first - 1); i < end; ++i) {
      if (claimed_[i]) return Status(ErrorCode::kInvalidArgument, "part " + std::to_string(i + 1) + " of " + key_ + " sent twice");
      claimed_[i] = true;
    }
    return Status();
  }
  void release(int first, size_t n) {
    std::lock_guard lock(mu_);
    for (size_t i = static_cast<size_t>(first - 1); i < static_cast<size_t>(first - 1) + n; ++i) claimed_[i] = false;
  }
  void record(int number, std::string etag, uint64_t bytes) {
    std::lock_guard lock(mu_);
    etags_[static_cast<size_t>(number - 1)] = std::move(etag);
    bytes_[static_cast<size_t>(number - 1)] = bytes;
    total_ += bytes;
  }

  S3ObjectStore& store_;
  const std::string key_, fkey_, upload_id_;
  const bool create_only_;
  std::mutex mu_;                   // guards the fields below
  bool completed_ = false;          // read unguarded only by the destructor (no call runs then)
  std::vector<bool> claimed_;       // per part number - 1: reserved by a call
  std::vector<std::string> etags_;  // per part number - 1: its ETag once sent ("" until then)
  std::vector<uint64_t> bytes_;     // per part number - 1: its length once sent
  uint64_t total_ = 0;
};

// Create-only: the HEAD that finds an existing entry and the initiation run at once (the
// initiation publishes nothing, and an upload started for a key that exists is aborted), so an
// incremental save can start copying one round trip sooner.
Result<std::unique_ptr<MultipartUpload>> S3ObjectStore::start_upload(std::string_view key, const PutOptions& opts) {
  LC_RETURN_IF_ERROR(check_object_key(key));
  std::string upload_id;
  Status absent;
  Status s = run_bounded(opts.create_only ? 2 : 1, 2, [&](size_t i) -> Status {
    if (i == 1) return absent = check_absent(key);
    LC_ASSIGN_OR_RETURN(upload_id, initiate_multipart(full_key(key), what("multipart PUT", key)));
    return Status();
  });
  if (!upload_id.empty() && !s.ok()) (void)abort_multipart_upload(key, upload_id);
  if (!absent.ok()) return absent;  // kAlreadyExists before any failure of the initiation
  LC_RETURN_IF_ERROR(s);
  return std::unique_ptr<MultipartUpload>(new S3Upload(*this, std::string(key), std::move(upload_id), opts.create_only));
}

std::string S3ObjectStore::copy_what(const std::string& key, int number, const RangeRequest& source) const {
  return "copying bytes " + std::to_string(source.offset) + "-" + std::to_string(source.offset + source.length - 1) + " of " + describe() +
         "/" + source.key + " as part " + std::to_string(number) + " of " + describe() + "/" + key;
}

Result<std::string> S3ObjectStore::copy_part_request(const std::string& key, const std::string& upload_id, int number,
                                                     const RangeRequest& source) {
  const std::string w = copy_what(key, number, source);
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
  if (source.if_match.empty()) return copy(false);
  // Whether this copy sent the condition is captured once: copies run in parallel, and another
  // may mark the server broken between this one's 412 and its check below.
  const bool conditional = !copy_if_match_known_broken();
  auto copied = copy(conditional);
  if (!copied.ok() && copied.error().code() == ErrorCode::kPreconditionFailed && conditional) {
    // Swift's s3api compares x-amz-copy-source-if-match with its own ETag of a multipart
    // object, not the S3 one it reports: 412 for an object that did not change. Told apart by a
    // HEAD; such a server is remembered (for every store of this process on its endpoint) and
    // pinned by check_copy_source() alone.
    LC_ASSIGN_OR_RETURN(ObjectInfo now, head(source.key));
    if (now.etag != source.if_match) return copied;
    copy_if_match_broken_ = true;
    {
      IfMatchQuirks& q = if_match_quirks();
      std::lock_guard lock(q.mu);
      q.endpoints.insert(config_.endpoint.url());
    }
    copied = copy(false);
  }
  return copied;
}

Status S3ObjectStore::check_copy_source(const RangeRequest& source, const std::string& what) {
  if (source.if_match.empty()) return Status();
  LC_ASSIGN_OR_RETURN(ObjectInfo now, head(source.key));
  if (now.etag != source.if_match)
    return Status(ErrorCode::kPreconditionFailed,
                  what + ": the source object was replaced (its ETag is no longer " + source.if_match + ")");
  return Status();
}

}  // namespace lazycache::remote
