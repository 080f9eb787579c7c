// SPDX-License-Identifier: MIT
// The store conformance suite: one body, run against every ObjectStore implementation.
//   [local]   LocalDirObjectStore in a temp dir (no server)
//   [swift]   S3ObjectStore against OpenStack Swift s3api (ctest fixture "swift", strict SigV4)
//   [s3rver]  S3ObjectStore against @20minutes/s3rver 5 (fixture "s3rver"; wrong suffix ranges)
//   [http]    HttpObjectStore reads (through fault_proxy.py serving a directory with Range/ETag)
// The S3 runs read the server's env file from $LC_S3_ENV (ctest sets it).
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "remote/cache_keys.h"
#include "remote/http_object_store.h"
#include "remote/local_dir_object_store.h"
#include "remote/object_byte_source.h"
#include "remote/parallel.h"
#include "remote_test_support.h"

using namespace lazycache;
using namespace lazycache::remote;
using namespace lazycache::remote::test;

namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string read_range(ObjectStore& store, const std::string& key, uint64_t offset, uint64_t length, const std::string& etag = "") {
  std::string out(length, '\0');
  auto n = store.get_range(RangeRequest{key, offset, length, etag}, std::as_writable_bytes(std::span<char>(out)));
  INFO(n.status().to_string());
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

ObjectInfo put_string(ObjectStore& store, const std::string& key, const std::string& bytes, PutOptions opts = {}) {
  auto info = store.put(key, string_body(std::make_shared<const std::string>(bytes)), opts);
  INFO(key << ": " << info.status().to_string());
  REQUIRE(info.ok());
  return *info;
}

void small_objects(ObjectStore& store, const std::string& p) {
  std::string data = ramp(7, 0, 1000);
  auto info = put_string(store, p + "small", data);
  CHECK(info.size == 1000);
  auto head = store.head(p + "small");
  REQUIRE(head.ok());
  CHECK(head->size == 1000);
  CHECK(!head->etag.empty());
  CHECK(read_range(store, p + "small", 100, 200) == data.substr(100, 200));
  CHECK(read_range(store, p + "small", 0, 1000, head->etag) == data);
  CHECK(read_range(store, p + "small", 900, 500) == data.substr(900));  // clipped at the end
  CHECK(read_range(store, p + "small", 1000, 10).empty());              // at the end: 0 bytes
  // Suffix reads give the tail plus size and etag, whatever the server does with bytes=-N.
  std::string tail(100, '\0');
  auto t = store.get_tail(p + "small", 100, std::as_writable_bytes(std::span<char>(tail)));
  REQUIRE(t.ok());
  CHECK(t->bytes == 100);
  CHECK(t->info.size == 1000);
  CHECK(tail == data.substr(900));
  std::string all(5000, '\0');
  t = store.get_tail(p + "small", 5000, std::as_writable_bytes(std::span<char>(all)));
  REQUIRE(t.ok());
  CHECK(t->bytes == 1000);
  CHECK(all.substr(0, 1000) == data);
}

void multipart(ObjectStore& store, const std::string& p) {
  // 12 MiB + 123 in 5 MiB parts: three parts, uploaded by three threads.
  std::string data = ramp(11, 0, 12 * kMiB + 123);
  PutOptions opts;
  opts.part_size_bytes = 5 * kMiB;
  opts.concurrency = 3;
  auto info = put_string(store, p + "multi", data, opts);
  CHECK(info.size == data.size());
  auto head = store.head(p + "multi");
  REQUIRE(head.ok());
  CHECK(head->size == data.size());
  // Ranges across both part boundaries, and the tail.
  CHECK(read_range(store, p + "multi", 5 * kMiB - 10, 20, head->etag) == data.substr(5 * kMiB - 10, 20));
  CHECK(read_range(store, p + "multi", 10 * kMiB - 7, 14, head->etag) == data.substr(10 * kMiB - 7, 14));
  std::string tail(64 << 10, '\0');
  auto t = store.get_tail(p + "multi", tail.size(), std::as_writable_bytes(std::span<char>(tail)));
  REQUIRE(t.ok());
  CHECK(t->info.size == data.size());
  CHECK(tail == data.substr(data.size() - tail.size()));
}

void if_match_after_replace(ObjectStore& store, const std::string& p) {
  put_string(store, p + "replaced", ramp(1, 0, 5000));
  auto old_info = store.head(p + "replaced");
  REQUIRE(old_info.ok());
  auto reader = ObjectByteSource::from_info(std::shared_ptr<ObjectStore>(&store, [](ObjectStore*) {}), *old_info);
  std::string buf(100, '\0');
  REQUIRE(reader->read_at(0, std::as_writable_bytes(std::span<char>(buf))).ok());
  put_string(store, p + "replaced", ramp(2, 0, 5000));
  auto stale = store.get_range(RangeRequest{p + "replaced", 0, 100, old_info->etag}, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(!stale.ok());
  CHECK(stale.error().code() == ErrorCode::kPreconditionFailed);
  auto via_source = reader->read_at(10, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(!via_source.ok());
  CHECK(via_source.error().code() == ErrorCode::kPreconditionFailed);
  auto fresh = store.head(p + "replaced");
  REQUIRE(fresh.ok());
  CHECK(fresh->etag != old_info->etag);
  CHECK(read_range(store, p + "replaced", 0, 100, fresh->etag) == ramp(2, 0, 100));
}

void create_only(ObjectStore& store, const std::string& p) {
  PutOptions once;
  once.create_only = true;
  put_string(store, p + "entry", "first", once);
  auto again = store.put(p + "entry", string_body(std::make_shared<const std::string>("second")), once);
  REQUIRE(!again.ok());
  CHECK(again.error().code() == ErrorCode::kAlreadyExists);
  CHECK(read_range(store, p + "entry", 0, 100) == "first");
}

// Another writer publishes the key while a create-only put is still reading its body (the
// window between the first existence check and the publish): the create-only put must not
// replace it, whether the store has atomic create (local link(2), If-None-Match) or only the HEAD
// made just before publishing (Swift, s3rver). Small (one PUT) and multipart bodies.
void create_only_race(ObjectStore& store, const std::string& p, uint64_t body_size) {
  const std::string key = p + "raced-" + std::to_string(body_size);
  auto mine = std::make_shared<const std::string>(ramp(11, 0, body_size));
  auto inner = string_body(mine);
  bool raced = false;
  BodyReader body = [&](std::span<std::byte> out) -> Result<size_t> {
    auto n = inner(out);
    if (n.ok() && *n == 0 && !raced) {
      raced = true;
      put_string(store, key, "the other job's entry");
    }
    return n;
  };
  PutOptions opts;
  opts.create_only = true;
  opts.part_size_bytes = 5 * kMiB;
  opts.concurrency = 2;
  auto r = store.put(key, body, opts);
  REQUIRE(raced);
  INFO(r.status().to_string());
  REQUIRE(!r.ok());
  CHECK(r.error().code() == ErrorCode::kAlreadyExists);
  CHECK(read_range(store, key, 0, 100) == "the other job's entry");
}

void missing_and_delete(ObjectStore& store, const std::string& p) {
  auto h = store.head(p + "does-not-exist");
  REQUIRE(!h.ok());
  CHECK(h.error().code() == ErrorCode::kNotFound);
  std::string buf(10, '\0');
  auto g = store.get_range(RangeRequest{p + "does-not-exist", 0, 10, ""}, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(!g.ok());
  CHECK(g.error().code() == ErrorCode::kNotFound);
  put_string(store, p + "doomed", "x");
  REQUIRE(store.remove(p + "doomed").ok());
  CHECK(store.head(p + "doomed").error().code() == ErrorCode::kNotFound);
  CHECK(store.remove(p + "doomed").ok());  // deleting an absent key is fine
  auto bad = store.head("../escape");
  REQUIRE(!bad.ok());
  CHECK(bad.error().code() == ErrorCode::kInvalidArgument);
}

// 1005 keys: more than one S3 page. They stay on the server between runs (fixed prefix), so only
// the first run against a data dir pays for the uploads.
void list_pagination(ObjectStore& store, const std::string& prefix) {
  constexpr int kKeys = 1005;
  std::set<std::string> present;
  auto list_all = [&](int& pages) {
    std::vector<std::string> keys;
    std::string cont;
    pages = 0;
    do {
      auto page = store.list(prefix, cont);
      INFO(page.status().to_string());
      REQUIRE(page.ok());
      ++pages;
      for (auto& o : page->objects) keys.push_back(o.key);
      cont = page->next_continuation;
    } while (!cont.empty() && pages < 100);
    return keys;
  };
  int pages = 0;
  for (auto& k : list_all(pages)) present.insert(k);
  std::vector<std::string> missing;
  for (int i = 0; i < kKeys; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "k%05d", i);
    if (!present.count(prefix + name)) missing.push_back(prefix + name);
  }
  Status s = run_bounded(missing.size(), 16, [&](size_t i) -> Status {
    return store.put(missing[i], string_body(std::make_shared<const std::string>(missing[i])), {}).status();
  });
  INFO(s.to_string());
  REQUIRE(s.ok());
  auto keys = list_all(pages);
  CHECK(keys.size() == kKeys);
  CHECK(pages >= 2);
  CHECK(std::is_sorted(keys.begin(), keys.end()));
  CHECK(std::set<std::string>(keys.begin(), keys.end()).size() == keys.size());
}

// A body that fails after `fail_after` bytes.
BodyReader failing_body(uint64_t fail_after) {
  auto pos = std::make_shared<uint64_t>(0);
  return [pos, fail_after](std::span<std::byte> out) -> Result<size_t> {
    if (*pos >= fail_after) return Status(ErrorCode::kIo, "simulated read error in the archive writer");
    size_t n = std::min<uint64_t>(out.size(), fail_after - *pos);
    std::memset(out.data(), 'z', n);
    *pos += n;
    return n;
  };
}

void failed_put_leaves_nothing(ObjectStore& store, const std::string& p) {
  PutOptions opts;
  opts.part_size_bytes = 5 * kMiB;
  opts.concurrency = 2;
  auto r = store.put(p + "failed", failing_body(11 * kMiB), opts);
  REQUIRE(!r.ok());
  CHECK(r.error().message().find("simulated read error") != std::string::npos);
  CHECK(store.head(p + "failed").error().code() == ErrorCode::kNotFound);
}

// `fixed` is the same store under a prefix kept across runs (for the 1005-key listing).
void conformance(ObjectStore& store, ObjectStore& fixed, const std::string& p) {
  SECTION("small put, ranged get, suffix read") { small_objects(store, p); }
  SECTION("multipart put, ranges across part boundaries") { multipart(store, p); }
  SECTION("If-Match after replace gives kPreconditionFailed") { if_match_after_replace(store, p); }
  SECTION("create-only publish") { create_only(store, p); }
  SECTION("create-only loses to an entry published during the upload") {
    create_only_race(store, p, 1000);
    create_only_race(store, p, 11 * kMiB);
  }
  SECTION("missing key, delete, bad key") { missing_and_delete(store, p); }
  SECTION("list pagination over 1000 keys") { list_pagination(fixed, "pagination/"); }
  SECTION("a failed put leaves no object") { failed_put_leaves_nothing(store, p); }
}

void s3_specifics(S3ObjectStore& store, const S3Env& env, const std::string& p, bool lists_uploads) {
  SECTION("multipart parts go up concurrently") {
    std::string data = ramp(3, 0, 15 * kMiB + 1);
    PutOptions opts;
    opts.part_size_bytes = 5 * kMiB;
    opts.concurrency = 4;
    put_string(store, p + "concurrent", data, opts);
    CHECK(store.http().max_in_flight() >= 2);
  }
  SECTION("a failed multipart upload is aborted") {
    PutOptions opts;
    opts.part_size_bytes = 5 * kMiB;
    opts.concurrency = 2;
    REQUIRE(!store.put(p + "aborted", failing_body(11 * kMiB), opts).ok());
    if (lists_uploads) {
      auto uploads = store.list_multipart_uploads(p + "aborted");
      INFO(uploads.status().to_string());
      REQUIRE(uploads.ok());
      CHECK(uploads->empty());
    }
  }
  SECTION("wrong credentials: kPermissionDenied naming bucket and key, no secret") {
    S3Env bad = env;
    bad.secret_key = "definitely-not-the-secret";
    auto wrong = s3_store_from_env(bad, p.substr(0, p.size() - 1));
    put_string(store, p + "guarded", "x");
    auto h = wrong->get_range(RangeRequest{"guarded", 0, 1, ""}, std::as_writable_bytes(std::span<char>(bad.secret_key)));
    REQUIRE(!h.ok());
    CHECK(h.error().code() == ErrorCode::kPermissionDenied);
    CHECK(h.error().message().find("s3://lazycache/") != std::string::npos);
    CHECK(h.error().message().find("guarded") != std::string::npos);
    CHECK(h.error().message().find("definitely-not") == std::string::npos);
  }
}

std::string s3_prefix(const char* server) { return std::string("conformance/") + server + "/" + run_id(); }

}  // namespace

// Temporary credentials: the session token goes out as X-Amz-Security-Token and is covered by
// the signature (a server verifying SigV4 recomputes it over every header named in SignedHeaders,
// so a token signed but not sent, or sent but not signed, fails), and never shows in errors.
void session_token(const S3Env& env, const std::string& prefix) {
  const std::string token = "FwoGZXIvYXdzELC-session-token-for-the-test";
  auto with_token = s3_store_from_env(env, prefix, {}, token);
  PutOptions multipart;
  multipart.part_size_bytes = 5 * kMiB;
  put_string(*with_token, "tokened", ramp(13, 0, 6 * kMiB + 7), multipart);
  CHECK(read_range(*with_token, "tokened", 6 * kMiB - 3, 10) == ramp(13, 6 * kMiB - 3, 10));
  auto listed = with_token->list("tok", "");
  REQUIRE(listed.ok());
  CHECK(listed->objects.size() == 1);
  S3Env bad = env;
  bad.secret_key = "not-the-secret";
  auto rejected = s3_store_from_env(bad, prefix, {}, token)->head("tokened");
  REQUIRE(!rejected.ok());
  CHECK(rejected.error().code() == ErrorCode::kPermissionDenied);
  CHECK(rejected.error().message().find(token) == std::string::npos);
  CHECK(rejected.error().message().find("not-the-secret") == std::string::npos);
}

// The whole suite again with the bucket in the Host header (BUCKET.s3.localhost): a server that
// took the first path segment for the bucket would fail every request.
void vhost_conformance(const char* server) {
  S3Env env = load_s3_env("LC_S3_ENV");
  auto store = s3_vhost_store_from_env(env, s3_prefix(server) + "-vhost");
  conformance(*store, *s3_vhost_store_from_env(env, std::string("conformance/") + server + "-kept"), "c/");
  SECTION("the objects are the ones path-style addressing sees") {
    put_string(*store, "c/both-ways", "same object");
    auto path_style = s3_store_from_env(env, s3_prefix(server) + "-vhost");
    CHECK(read_range(*path_style, "c/both-ways", 0, 100) == "same object");
  }
}

TEST_CASE("conformance: local directory store", "[local]") {
  TempDir dir;
  auto store = LocalDirObjectStore::open(dir.path() + "/store");
  REQUIRE(store.ok());
  conformance(**store, **store, "c/");
  SECTION("no temp files are left behind") {
    REQUIRE(!(*store)->put("c/failed", failing_body(100), {}).ok());
    CHECK(std::filesystem::is_empty(dir.path() + "/store/.lazycache-tmp"));
  }
}

TEST_CASE("conformance: Swift s3api", "[swift]") {
  S3Env env = load_s3_env("LC_S3_ENV");
  auto store = s3_store_from_env(env, s3_prefix("swift"));
  conformance(*store, *s3_store_from_env(env, "conformance/swift-kept"), "c/");
  s3_specifics(*store, env, "c/", true);
  SECTION("a skewed clock is rejected and reported") {
    S3Config skewed;
    skewed.clock_offset_s = -20 * 60;
    auto wrong = s3_store_from_env(env, s3_prefix("swift"), skewed);
    auto h = wrong->head("anything");
    REQUIRE(!h.ok());
    CHECK(h.error().code() == ErrorCode::kPermissionDenied);
  }
  SECTION("an exact key looked up with its tail costs one request") {
    // What a mount does first (tools/cmd_mount.cpp): the suffix-range GET finds the entry as a
    // HEAD would, and brings the seek table and index with it.
    const std::string v = entry_version({"/w/deps"});
    const std::string name = *entry_object_key("c", "tail-key", v);
    const std::string data = ramp(7, 0, (1 << 20) + 4321);
    put_string(*store, name, data);
    const uint64_t before = store->http().requests();
    auto r = resolve_cache_key(*store, "c", "tail-key", {}, v, 256 << 10);
    REQUIRE(r.ok());
    REQUIRE(r->match);
    CHECK(store->http().requests() - before == 1);
    CHECK(r->match->object.size == data.size());
    CHECK(!r->match->object.etag.empty());
    CHECK(r->tail == data.substr(data.size() - (256 << 10)));
  }
  SECTION("session tokens are signed and sent; never in errors") { session_token(env, s3_prefix("swift")); }
  SECTION("signed payloads are accepted by a server that verifies them") {
    S3Config sign;
    sign.sign_payload = true;
    auto signing = s3_store_from_env(env, s3_prefix("swift"), sign);
    put_string(*signing, "signed", ramp(5, 0, 4096));
    CHECK(read_range(*signing, "signed", 0, 4096) == ramp(5, 0, 4096));
  }
}

TEST_CASE("conformance: s3rver 5", "[s3rver]") {
  S3Env env = load_s3_env("LC_S3_ENV");
  auto store = s3_store_from_env(env, s3_prefix("s3rver"));
  conformance(*store, *s3_store_from_env(env, "conformance/s3rver-kept"), "c/");
  // s3rver answers ListMultipartUploads with 501: the abort itself is still exercised.
  s3_specifics(*store, env, "c/", false);
  SECTION("suffix ranges answered wrongly are detected") {
    put_string(*store, "c/suffix", ramp(9, 0, 1000));
    std::string tail(10, '\0');
    auto t = store->get_tail("c/suffix", 10, std::as_writable_bytes(std::span<char>(tail)));
    REQUIRE(t.ok());
    CHECK(tail == ramp(9, 990, 10));
    CHECK(store->suffix_ranges_broken());
  }
}

TEST_CASE("conformance: read-only HTTP store", "[http]") {
  TempDir dir;
  std::string data = ramp(4, 0, 3 * kMiB + 5);
  std::filesystem::create_directories(dir.path() + "/site/a");
  std::ofstream(dir.path() + "/site/a/entry.tar.zst", std::ios::binary) << data;
  FaultProxy server("", dir.path() + "/site");
  HttpObjectStore store(server.url(), "");
  auto head = store.head("a/entry.tar.zst");
  INFO(head.status().to_string());
  REQUIRE(head.ok());
  CHECK(head->size == data.size());
  CHECK(read_range(store, "a/entry.tar.zst", kMiB - 3, 100, head->etag) == data.substr(kMiB - 3, 100));
  std::string tail(4096, '\0');
  auto t = store.get_tail("a/entry.tar.zst", 4096, std::as_writable_bytes(std::span<char>(tail)));
  REQUIRE(t.ok());
  CHECK(tail == data.substr(data.size() - 4096));
  CHECK(store.head("a/missing").error().code() == ErrorCode::kNotFound);
  CHECK(store.list("a/", "").error().code() == ErrorCode::kUnsupported);
  CHECK(store.put("x", string_body(std::make_shared<const std::string>("x")), {}).error().code() == ErrorCode::kUnsupported);
  SECTION("a presigned-style URL names one object whatever the key") {
    HttpObjectStore one(server.url() + "/a/entry.tar.zst", "X-Amz-Signature=ignored-by-this-server");
    auto h = one.head("any-key.tar.zst");
    REQUIRE(h.ok());
    CHECK(h->size == data.size());
  }
  SECTION("If-Match: a replaced file fails cleanly") {
    std::ofstream(dir.path() + "/site/a/entry.tar.zst.new", std::ios::binary) << ramp(5, 0, 100);
    std::filesystem::rename(dir.path() + "/site/a/entry.tar.zst.new", dir.path() + "/site/a/entry.tar.zst");
    std::string buf(10, '\0');
    auto r = store.get_range(RangeRequest{"a/entry.tar.zst", 0, 10, head->etag}, std::as_writable_bytes(std::span<char>(buf)));
    REQUIRE(!r.ok());
    CHECK(r.error().code() == ErrorCode::kPreconditionFailed);
  }
}

TEST_CASE("conformance: Swift s3api, virtual-hosted style", "[swift-vhost]") { vhost_conformance("swift"); }
