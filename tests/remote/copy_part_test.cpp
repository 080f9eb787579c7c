// SPDX-License-Identifier: MIT
// ObjectStore::start_upload (remote/multipart_upload.h): objects built from parts sent by us and
// ranges of another object copied by the store, against every store that copies:
//   [local]   LocalDirObjectStore (copy_file_range)
//   [swift]   Swift s3api (UploadPartCopy), fixture "swift"
//   [s3rver]  s3rver 5, fixture "s3rver": what it supports is checked and stated either way
// Ranges on and off part boundaries, S3's 5 MiB minimum, a source replaced before the copy
// (the copy is pinned to its ETag), create-only, no upload left behind after a failure, and (S3)
// parts discarded and sent again.
#include <catch2/catch.hpp>
#include <filesystem>

#include "remote/local_dir_object_store.h"
#include "remote_test_support.h"

using namespace lazycache;
using namespace lazycache::remote;
using namespace lazycache::remote::test;

namespace {

constexpr uint64_t kMiB = 1 << 20;

ObjectInfo put_string(ObjectStore& store, const std::string& key, const std::string& bytes) {
  PutOptions opts;
  opts.part_size_bytes = 5 * kMiB;
  auto info = store.put(key, string_body(std::make_shared<const std::string>(bytes)), opts);
  INFO(key << ": " << info.status().to_string());
  REQUIRE(info.ok());
  return *info;
}

std::string read_all(ObjectStore& store, const std::string& key) {
  auto head = store.head(key);
  INFO(head.status().to_string());
  REQUIRE(head.ok());
  std::string out(head->size, '\0');
  auto n = store.get_range(RangeRequest{key, 0, head->size, head->etag}, std::as_writable_bytes(std::span<char>(out)));
  REQUIRE(n.ok());
  REQUIRE(*n == head->size);
  return out;
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s)); }

std::unique_ptr<MultipartUpload> start(ObjectStore& store, const std::string& key, bool create_only = true) {
  PutOptions opts;
  opts.create_only = create_only;
  auto up = store.start_upload(key, opts);
  INFO(up.status().to_string());
  REQUIRE(up.ok());
  return std::move(up).value();
}

// The cases every copying store passes. `min` is the store's minimum part size.
void copy_parts(ObjectStore& store, const std::string& p, uint64_t min) {
  const std::string src_bytes = ramp(1, 0, 13 * kMiB + 11);
  const ObjectInfo src = put_string(store, p + "base", src_bytes);

  SECTION("sent and copied parts, ranges on and off part boundaries") {
    auto up = start(store, p + "mixed");
    CHECK(up->min_part_bytes() == min);
    const std::string sent = ramp(2, 0, 5 * kMiB + 3);
    REQUIRE(up->upload_part(1, bytes_of(sent)).ok());
    // Off boundaries: starts 7 bytes into the base's second 5 MiB part, ends inside its third.
    Status copied = up->copy_part(2, RangeRequest{p + "base", 5 * kMiB + 7, 6 * kMiB, src.etag});
    INFO(copied.to_string());
    REQUIRE(copied.ok());
    // On a boundary: exactly the base's first part, as the last (short parts allowed last).
    REQUIRE(up->copy_part(3, RangeRequest{p + "base", 0, 5 * kMiB, src.etag}).ok());
    REQUIRE(up->upload_part(4, bytes_of(std::string("tail"))).ok());
    auto done = up->complete();
    INFO(done.status().to_string());
    REQUIRE(done.ok());
    const std::string want = sent + src_bytes.substr(5 * kMiB + 7, 6 * kMiB) + src_bytes.substr(0, 5 * kMiB) + "tail";
    CHECK(done->size == want.size());
    CHECK(read_all(store, p + "mixed") == want);
  }
  SECTION("a source replaced since it was read is not copied (pinned to its ETag)") {
    const ObjectInfo replaced = put_string(store, p + "base", ramp(9, 0, 13 * kMiB + 11));
    REQUIRE(replaced.etag != src.etag);
    {
      auto up = start(store, p + "pinned");
      Status s = up->copy_part(1, RangeRequest{p + "base", 0, 6 * kMiB, src.etag});
      INFO(s.to_string());
      REQUIRE(!s.ok());
      CHECK(s.code() == ErrorCode::kPreconditionFailed);
    }  // destroyed uncompleted: aborted
    CHECK(store.head(p + "pinned").error().code() == ErrorCode::kNotFound);
  }
  SECTION("create-only: an existing key is refused (an upload initiated beside the HEAD is aborted), no part sent") {
    put_string(store, p + "exists", "x");
    PutOptions opts;
    opts.create_only = true;
    auto up = store.start_upload(p + "exists", opts);
    REQUIRE(!up.ok());
    CHECK(up.error().code() == ErrorCode::kAlreadyExists);
  }
}

std::string s3_prefix(const char* server) { return std::string("copy-part/") + server + "/" + run_id() + "/"; }

// S3's 5 MiB rule: a copied part below it that is not the last fails the upload (at complete at
// the latest), leaving no object and no upload.
void five_mib_minimum(S3ObjectStore& store, const std::string& p, bool lists_uploads) {
  put_string(store, p + "small-base", ramp(3, 0, 8 * kMiB));
  auto head = store.head(p + "small-base");
  REQUIRE(head.ok());
  {
    auto up = start(store, p + "too-small");
    Status a = up->copy_part(1, RangeRequest{p + "small-base", 0, 1 * kMiB, head->etag});
    Status b = a.ok() ? up->copy_part(2, RangeRequest{p + "small-base", kMiB, 1 * kMiB, head->etag}) : a;
    Status c = b.ok() ? up->complete().status() : b;
    INFO(c.to_string());
    CHECK(!c.ok());
  }
  CHECK(store.head(p + "too-small").error().code() == ErrorCode::kNotFound);
  if (lists_uploads) {
    auto uploads = store.list_multipart_uploads(p + "too-small");
    REQUIRE(uploads.ok());
    CHECK(uploads->empty());
  }
}

// MultipartUpload::copy_parts: consecutive parts copied at once (UploadPartCopy requests in
// flight together), each where its part number says whatever order they finish in, the source
// pinned. `env` gives a second store whose request counters start with the copies.
void parallel_copies(const S3Env& env, ObjectStore& setup, const std::string& p) {
  const std::string src_bytes = ramp(4, 0, 24 * kMiB);
  const ObjectInfo src = put_string(setup, p + "par-base", src_bytes);
  auto store = s3_store_from_env(env, "lazycache-test");
  // Not create-only: its HEAD runs beside the initiation, which would leave two in flight before
  // the copies.
  auto up = start(*store, p + "par", false);
  std::vector<RangeRequest> sources;  // the base's four 6 MiB quarters, last first
  for (uint64_t q = 4; q > 0; --q) sources.push_back(RangeRequest{p + "par-base", (q - 1) * 6 * kMiB, 6 * kMiB, src.etag});
  const int before = store->http().max_in_flight();
  Status copied = up->copy_parts(1, sources, 4);
  INFO(copied.to_string());
  REQUIRE(copied.ok());
  CHECK(before == 1);
  CHECK(store->http().max_in_flight() >= 2);
  REQUIRE(up->upload_part(5, bytes_of(std::string("tail"))).ok());
  auto done = up->complete();
  INFO(done.status().to_string());
  REQUIRE(done.ok());
  std::string want;
  for (uint64_t q = 4; q > 0; --q) want += src_bytes.substr((q - 1) * 6 * kMiB, 6 * kMiB);
  CHECK(read_all(*store, p + "par") == want + "tail");
  SECTION("a replaced source fails the batch, nothing is published") {
    put_string(setup, p + "par-base", ramp(5, 0, 24 * kMiB));
    {
      auto again = start(*store, p + "par-pinned");
      Status s = again->copy_parts(1, sources, 4);
      CHECK(s.code() == ErrorCode::kPreconditionFailed);
    }
    CHECK(store->head(p + "par-pinned").error().code() == ErrorCode::kNotFound);
  }
}

// MultipartUpload::discard_part, what copies made ahead of an incremental save rely on: a part
// copied and then discarded is replaced by a later part under its number, one discarded after
// the last part sent is left out of the completion, and the unchecked copies (no
// x-amz-copy-source-if-match) are pinned by complete_checking's HEAD.
void discarded_parts(ObjectStore& store, const std::string& p) {
  const std::string src_bytes = ramp(6, 0, 18 * kMiB);
  const ObjectInfo src = put_string(store, p + "disc-base", src_bytes);
  const std::vector<RangeRequest> pinned{RangeRequest{p + "disc-base", 0, 0, src.etag}};
  {
    auto up = start(store, p + "disc");
    REQUIRE(up->copy_part_unchecked(1, RangeRequest{p + "disc-base", 0, 6 * kMiB, src.etag}).ok());
    REQUIRE(up->copy_part_unchecked(2, RangeRequest{p + "disc-base", 6 * kMiB, 6 * kMiB, src.etag}).ok());
    REQUIRE(up->copy_part_unchecked(3, RangeRequest{p + "disc-base", 12 * kMiB, 6 * kMiB, src.etag}).ok());
    REQUIRE(up->discard_part(2).ok());
    REQUIRE(up->discard_part(3).ok());
    REQUIRE(up->discard_part(7).ok());  // never sent: nothing to leave out
    const std::string sent = ramp(7, 0, 100);
    REQUIRE(up->upload_part(2, bytes_of(sent)).ok());  // replaces the discarded copy
    auto done = up->complete_checking(pinned);
    INFO(done.status().to_string());
    REQUIRE(done.ok());
    CHECK(done->size == 6 * kMiB + sent.size());
    CHECK(read_all(store, p + "disc") == src_bytes.substr(0, 6 * kMiB) + sent);
  }
  // A source replaced after unchecked copies fails complete_checking: nothing is published.
  {
    auto up = start(store, p + "disc-pinned");
    REQUIRE(up->copy_part_unchecked(1, RangeRequest{p + "disc-base", 0, 6 * kMiB, src.etag}).ok());
    put_string(store, p + "disc-base", ramp(8, 0, 18 * kMiB));
    CHECK(up->complete_checking(pinned).status().code() == ErrorCode::kPreconditionFailed);
  }
  CHECK(store.head(p + "disc-pinned").error().code() == ErrorCode::kNotFound);
}

}  // namespace

TEST_CASE("copy parts: local directory store", "[local]") {
  TempDir dir;
  auto store = LocalDirObjectStore::open(dir.path() + "/store");
  REQUIRE(store.ok());
  copy_parts(**store, "c/", 1);
  SECTION("a range past the end of the source fails (Swift clips it instead; lazycache never asks)") {
    put_string(**store, "c/short", "0123456789");
    auto up = start(**store, "c/past");
    Status s = up->copy_part(1, RangeRequest{"c/short", 5, 6, (*store)->head("c/short")->etag});
    CHECK(s.code() == ErrorCode::kInvalidArgument);
  }
  SECTION("no temporaries are left behind by an aborted upload") {
    {
      auto up = start(**store, "c/abandoned");
      REQUIRE(up->upload_part(1, bytes_of(std::string("x"))).ok());
    }
    CHECK(std::filesystem::is_empty(dir.path() + "/store/.lazycache-tmp"));
    CHECK((*store)->head("c/abandoned").error().code() == ErrorCode::kNotFound);
  }
}

TEST_CASE("copy parts: Swift s3api", "[swift]") {
  S3Env env = load_s3_env("LC_S3_ENV");
  auto store = s3_store_from_env(env, "lazycache-test");
  copy_parts(*store, s3_prefix("swift"), 5 * kMiB);
  SECTION("the 5 MiB minimum") { five_mib_minimum(*store, s3_prefix("swift"), true); }
  SECTION("parts copied at once") { parallel_copies(env, *store, s3_prefix("swift")); }
  SECTION("discarded parts") { discarded_parts(*store, s3_prefix("swift")); }
  SECTION("its if-match quirk is probed once per endpoint and process") {
    // copy_parts() copied from a multipart source with x-amz-copy-source-if-match: Swift
    // answered 412 and a HEAD showed the source unchanged.
    CHECK(store->copy_if_match_known_broken());
    auto fresh = s3_store_from_env(env, "lazycache-test");
    CHECK(fresh->copy_if_match_known_broken());
    const std::string p = s3_prefix("swift");
    const ObjectInfo src = put_string(*fresh, p + "quirk-base", ramp(6, 0, 11 * kMiB));  // multipart (5 MiB parts)
    auto up = start(*fresh, p + "quirk");
    const uint64_t before = fresh->http().requests();
    REQUIRE(up->copy_part(1, RangeRequest{p + "quirk-base", 0, 6 * kMiB, src.etag}).ok());
    // The copy and the HEAD that pins it; a probe would add a refused copy and a HEAD.
    CHECK(fresh->http().requests() - before == 2);
  }
}

TEST_CASE("copy parts: s3rver 5", "[s3rver]") {
  S3Env env = load_s3_env("LC_S3_ENV");
  auto store = s3_store_from_env(env, "lazycache-test");
  copy_parts(*store, s3_prefix("s3rver"), 5 * kMiB);
  SECTION("parts copied at once") { parallel_copies(env, *store, s3_prefix("s3rver")); }
  SECTION("discarded parts") { discarded_parts(*store, s3_prefix("s3rver")); }
  // s3rver ignores x-amz-copy-source-if-match (docs/stores.md): no 412, nothing remembered.
  CHECK(!store->copy_if_match_known_broken());
}
