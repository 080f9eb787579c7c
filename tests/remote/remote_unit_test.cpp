// SPDX-License-Identifier: MIT
// Unit tests of the pure parts of remote/: store URLs, cache-key naming and resolution, the
// upload plan, backoff, AWS config files, ObjectByteSource merging, UploadSink. No network.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "remote/aws_config.h"
#include "remote/cache_keys.h"
#include "remote/object_byte_source.h"
#include "remote/ranged_get.h"
#include "remote/retrying_object_store.h"
#include "remote/sigv4.h"
#include "remote/store_url.h"
#include "remote/testing/fault_injecting_object_store.h"
#include "remote/testing/memory_object_store.h"
#include "remote/transfer_config.h"
#include "remote/upload_sink.h"
#include "remote_test_support.h"

using namespace lazycache;
using namespace lazycache::remote;
using lazycache::remote::testing::MemoryObjectStore;
using lazycache::remote::testing::StoreOp;

TEST_CASE("store URLs", "[unit]") {
  auto p = parse_store_url("/var/cache/x/");
  REQUIRE(p.ok());
  CHECK(p->kind == StoreUrl::Kind::kLocalDir);
  CHECK(p->dir == "/var/cache/x");
  p = parse_store_url("file:///srv/store");
  REQUIRE(p.ok());
  CHECK(p->dir == "/srv/store");
  p = parse_store_url("relative/dir");
  REQUIRE(p.ok());
  CHECK(p->dir.front() == '/');
  CHECK(p->dir.size() > std::string("/relative/dir").size());
  p = parse_store_url("s3://my-bucket/ci/caches/");
  REQUIRE(p.ok());
  CHECK(p->kind == StoreUrl::Kind::kS3);
  CHECK(p->bucket == "my-bucket");
  CHECK(p->prefix == "ci/caches");
  CHECK(p->display() == "s3://my-bucket/ci/caches");
  p = parse_store_url("https://cdn.example.com/caches/k.tar.zst?X-Amz-Signature=secret");
  REQUIRE(p.ok());
  CHECK(p->kind == StoreUrl::Kind::kHttp);
  CHECK(p->http_base == "https://cdn.example.com/caches/k.tar.zst");
  CHECK(p->http_query == "X-Amz-Signature=secret");
  CHECK(p->display().find("secret") == std::string::npos);
  for (const char* bad : {"", "s3://", "s3://ab", "ftp://x/y", "file://relative", "http:///path", "s3://bad_bucket!"}) {
    auto r = parse_store_url(bad);
    INFO(bad);
    CHECK(!r.ok());
  }
  // Mistyped URLs are refused instead of becoming a directory under the cwd; a path that only
  // contains a colon later on, or starts with ./, is still a directory.
  for (const char* typo : {"s3:/bucket/x", "file:/tmp/x", "s3:bucket", "https:/host/x", "S3:/b/x"}) {
    auto r = parse_store_url(typo);
    INFO(typo);
    REQUIRE(!r.ok());
    CHECK(r.error().message().find("mistyped URL") != std::string::npos);
  }
  for (const char* dir : {"./s3:x", "/tmp/a:b", "cache/v1:2"}) {
    auto r = parse_store_url(dir);
    INFO(dir);
    REQUIRE(r.ok());
    CHECK(r->kind == StoreUrl::Kind::kLocalDir);
  }
  auto leak = parse_store_url("gopher://h/p?token=secret");
  REQUIRE(!leak.ok());
  CHECK(leak.error().message().find("secret") == std::string::npos);
  auto ep = parse_endpoint("http://127.0.0.1:9000/");
  REQUIRE(ep.ok());
  CHECK(ep->host == "127.0.0.1:9000");
  CHECK(!parse_endpoint("127.0.0.1:9000").ok());
  CHECK(!parse_endpoint("http://h/path").ok());
}

TEST_CASE("cache key naming keeps prefixes and round-trips", "[unit]") {
  CHECK(*entry_object_key("", "npm-Linux-abc", "") == "npm-Linux-abc.tar.zst");
  CHECK(*entry_object_key("org/repo/main", "k", "") == "org%2Frepo%2Fmain/k.tar.zst");
  CHECK(*entry_object_key("", "a/b c%", "") == "a%2Fb%20c%25.tar.zst");
  CHECK(*entry_object_key("..", ".", "") == "%2E%2E/%2E.tar.zst");
  CHECK(*entry_object_key("", "k", "0123456789abcdef") == "k!0123456789abcdef.tar.zst");
  CHECK(*entry_object_key("", "k!x", "0123456789abcdef") == "k%21x!0123456789abcdef.tar.zst");  // a key's '!' is escaped
  CHECK(!entry_object_key("", "", "").ok());
  CHECK(!entry_object_key("", "a\ncache-hit=true", "").ok());
  CHECK(!entry_object_key("s\r", "k", "").ok());
  CHECK(!entry_object_key("", "k", "0123").ok());              // not a version entry_version() makes
  CHECK(!entry_object_key("", "k", "0123456789ABCDEF").ok());  // upper case
  const std::string v = entry_version({"/w/node_modules"});
  for (std::string key : {"plain", "with/slash", "sp ace", "pct%41", "ümlaut", "..", "a.tar.zst", "bang!"}) {
    for (const std::string& version : {std::string(), v}) {
      auto name = entry_object_key("scope/x", key, version);
      REQUIRE(name.ok());
      CHECK(check_object_key(*name).ok());
      auto back = entry_name_in_scope("scope/x", *name);
      REQUIRE(back);
      CHECK(back->key == key);
      CHECK(back->version == version);
      CHECK(name->rfind(entry_list_prefix("scope/x", key.substr(0, 2)), 0) == 0);  // prefix kept
    }
  }
  CHECK(!key_of_entry("", "other-scope/k.tar.zst"));
  CHECK(!key_of_entry("", "k.tar"));
  CHECK(!key_of_entry("", "%zz.tar.zst"));
  CHECK(!key_of_entry("", "k!0123.tar.zst"));             // a version we never write
  CHECK(!key_of_entry("", "!0123456789abcdef.tar.zst"));  // no key
}

TEST_CASE("entry version: the saved paths in order and the compression (actions/cache's cache version)", "[unit]") {
  const std::string a = entry_version({"/w/a"});
  CHECK(a.size() == 16);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a == entry_version({"/w/a"}));
  CHECK(a != entry_version({"/w/b"}));
  CHECK(entry_version({"/w/a", "/w/b"}) != entry_version({"/w/b", "/w/a"}));  // in order, as given
  CHECK(entry_version({"/w/a", "/w/b"}) != entry_version({"/w/a\n/w/b"}));    // not a plain join
  CHECK(a != entry_version({"/w/a"}, "gzip"));
  // Pinned: a change of the rule renames every entry (every job misses once), so it is deliberate.
  CHECK(a == remote::sha256_hex(std::string("lazycache-paths-v1") + '\0' + "/w/a" + '\0' + "zstd-seekable").substr(0, 16));
}

TEST_CASE("restore keys: exact > newest of the first matching prefix > later prefixes", "[unit]") {
  MemoryObjectStore store({"keys", 2});  // 2 keys per list page: resolution must follow pages
  const std::string v = entry_version({"/w/deps"});
  auto put = [&](const std::string& scope, const std::string& key, int64_t mtime, const std::string& version) {
    store.set_next_last_modified(mtime);
    store.put_bytes(*entry_object_key(scope, key, version), key);
  };
  put("", "deps-linux-1", 100, v);
  put("", "deps-linux-2", 300, v);
  put("", "deps-linux-3", 200, v);
  put("", "deps-mac-1", 900, v);
  put("", "deps-other", 50, v);
  put("s", "deps-linux-9", 999, v);
  auto r = resolve_cache_key(store, "", "deps-linux-1", {"deps-"}, v);
  REQUIRE(r.ok());
  REQUIRE(r->match);
  CHECK(r->match->exact);
  CHECK(r->match->key == "deps-linux-1");
  r = resolve_cache_key(store, "", "deps-linux-7", {"deps-linux-", "deps-"}, v);
  REQUIRE(r->match);
  CHECK(!r->match->exact);
  CHECK(r->match->key == "deps-linux-2");  // newest under the first prefix, not deps-mac-1
  r = resolve_cache_key(store, "", "x", {"nothing-", "deps-m"}, v);
  REQUIRE(r->match);
  CHECK(r->match->key == "deps-mac-1");
  r = resolve_cache_key(store, "", "x", {"nothing-"}, v);
  REQUIRE(r.ok());
  CHECK(!r->match);
  r = resolve_cache_key(store, "s", "x", {"deps-"}, v);
  REQUIRE(r->match);
  CHECK(r->match->key == "deps-linux-9");  // scopes do not see each other
}

TEST_CASE("restore keys: an entry saved for other paths is a miss, named as such; any version takes the newest", "[unit]") {
  MemoryObjectStore store({"keys", 2});
  const std::string mine = entry_version({"/w/deps"}), other = entry_version({"/w/elsewhere"});
  auto put = [&](const std::string& key, int64_t mtime, const std::string& version) {
    store.set_next_last_modified(mtime);
    store.put_bytes(*entry_object_key("", key, version), key);
  };
  put("k", 100, other);
  put("k", 200, "");       // saved by an older lazycache: no version in its name
  put("k-2", 300, other);  // a longer key is not the key
  put("p-1", 400, other);
  put("p-2", 50, mine);
  auto r = resolve_cache_key(store, "", "k", {}, mine);
  REQUIRE(r.ok());
  CHECK(!r->match);
  REQUIRE(r->other_versions.size() == 2);  // newest first, the unversioned one included
  CHECK(r->other_versions[0].version.empty());
  CHECK(r->other_versions[1].version == other);
  r = resolve_cache_key(store, "", "k", {}, other);
  REQUIRE(r->match);
  CHECK(r->match->exact);
  CHECK(r->match->object.key == *entry_object_key("", "k", other));
  // A restore-keys prefix takes only entries of this version, even when others are newer.
  r = resolve_cache_key(store, "", "x", {"p-"}, mine);
  REQUIRE(r->match);
  CHECK(r->match->key == "p-2");
  CHECK(r->other_versions.empty());  // nothing of the primary key
  // Any version (--any-paths, or no paths given): the newest entry of the key, then of the prefix.
  r = resolve_cache_key(store, "", "k", {}, std::nullopt);
  REQUIRE(r->match);
  CHECK(r->match->exact);
  CHECK(r->match->version.empty());  // the newest, at 200
  r = resolve_cache_key(store, "", "x", {"p-"}, std::nullopt);
  REQUIRE(r->match);
  CHECK(r->match->key == "p-1");
}

TEST_CASE("upload plan: auto sizes, S3 limits and the memory budget", "[unit]") {
  TransferConfig c;
  auto plan = choose_upload_plan(100 << 20, c);
  CHECK(plan.part_size_bytes == 8u << 20);
  CHECK(plan.concurrency == 4);
  plan = choose_upload_plan(200ull << 30, c);  // 200 GiB: parts must grow to stay under 10,000
  CHECK(plan.part_size_bytes * kMaxParts >= 200ull << 30);
  c.memory_budget_bytes = 24 << 20;  // only (concurrency + 1) x 8 MiB <= 24 MiB
  plan = choose_upload_plan(1ull << 30, c);
  CHECK((plan.concurrency + 1) * plan.part_size_bytes <= 24u << 20);
  CHECK(plan.concurrency >= 1);
  CHECK(plan.part_size_bytes >= kMinPartSize);
  c = TransferConfig{};
  c.part_size_bytes = 1;  // clamped to S3's minimum
  c.concurrency = 7;
  plan = choose_upload_plan(0, c);
  CHECK(plan.part_size_bytes == kMinPartSize);
  CHECK(plan.concurrency == 7);
}

TEST_CASE("backoff: full jitter under an exponential cap", "[unit]") {
  RetryConfig c{5, 100, 1000, 10000};
  for (int attempt = 0; attempt < 8; ++attempt) {
    int64_t cap = std::min<int64_t>(1000, 100LL << attempt);
    CHECK(RetryPolicy::backoff_ms(c, attempt, 0) == 0);
    CHECK(RetryPolicy::backoff_ms(c, attempt, ~0ull) <= cap);
    CHECK(RetryPolicy::backoff_ms(c, attempt, static_cast<uint64_t>(cap)) == cap);
  }
}

namespace {
// A store whose first streamed GET delivers `cut` bytes, tells them, and then loses its
// connection; it records every range asked for.
class DroppingStore final : public ObjectStoreWrapper {
 public:
  DroppingStore(std::shared_ptr<ObjectStore> inner, size_t cut) : ObjectStoreWrapper(std::move(inner)), cut_(cut) {}
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override {
    asked.emplace_back(req.offset, req.length);
    if (asked.size() == 1) {
      RangeRequest first = req;
      first.length = cut_;
      first.on_progress = nullptr;
      auto n = ObjectStoreWrapper::get_range(first, out.first(cut_));
      if (!n.ok()) return n;
      if (req.on_progress) req.on_progress(*n);
      return Status(ErrorCode::kUnavailable, "connection lost after " + std::to_string(*n) + " bytes");
    }
    return ObjectStoreWrapper::get_range(req, out);
  }
  std::vector<std::pair<uint64_t, uint64_t>> asked;

 private:
  size_t cut_;
};
}  // namespace

TEST_CASE("RetryingObjectStore: a streamed read that failed midway asks again only for what it was not told", "[unit]") {
  auto memory = std::make_shared<MemoryObjectStore>();
  const std::string data = test::ramp(3, 0, 10000);
  memory->put_bytes("k", data);
  auto dropping = std::make_shared<DroppingStore>(memory, 3000);
  RetryingObjectStore retrying(dropping, RetryConfig{5, 1, 5, 10000});
  std::string buf(6000, '\0');
  std::vector<size_t> told;
  RangeRequest req{"k", 1000, 6000, ""};
  req.on_progress = [&](size_t filled) { told.push_back(filled); };
  auto n = retrying.get_range(req, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(n.ok());
  CHECK(*n == 6000);
  CHECK(buf == data.substr(1000, 6000));
  REQUIRE(dropping->asked.size() == 2);
  CHECK(dropping->asked[1] == std::pair<uint64_t, uint64_t>{4000, 3000});  // the rest, not the whole range again
  // Told the first attempt's 3000 bytes; the memory store does not stream, so nothing after
  // (what a caller reads then is the returned count).
  CHECK(told == std::vector<size_t>{3000});
  CHECK(retrying.policy().retries() == 1);
  // Without a progress callback, a retry asks for the whole range again.
  auto again = std::make_shared<DroppingStore>(memory, 3000);
  RetryingObjectStore plain(again, RetryConfig{5, 1, 5, 10000});
  auto m = plain.get_range(RangeRequest{"k", 1000, 6000, ""}, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(m.ok());
  REQUIRE(again->asked.size() == 2);
  CHECK(again->asked[1] == std::pair<uint64_t, uint64_t>{1000, 6000});
  CHECK(buf == data.substr(1000, 6000));
}

TEST_CASE("RetryingObjectStore retries kUnavailable only", "[unit]") {
  auto memory = std::make_shared<MemoryObjectStore>();
  memory->put_bytes("k", "hello");
  auto faulty = std::make_shared<testing::FaultInjectingObjectStore>(memory);
  testing::FaultRule rule;
  rule.op = StoreOp::kGetRange;
  rule.times = 2;
  rule.action.fail = ErrorCode::kUnavailable;
  faulty->add_rule(rule);
  RetryingObjectStore retrying(faulty, RetryConfig{5, 1, 5, 10000});
  std::string buf(5, '\0');
  auto n = retrying.get_range(RangeRequest{"k", 0, 5, ""}, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(n.ok());
  CHECK(buf == "hello");
  CHECK(retrying.policy().retries() == 2);
  CHECK(memory->calls(StoreOp::kGetRange) == 1);
  auto missing = retrying.head("absent");  // kNotFound: no retry
  CHECK(missing.error().code() == ErrorCode::kNotFound);
  CHECK(retrying.policy().retries() == 2);
  testing::FaultRule forever = rule;
  forever.first_call = 4;
  forever.times = 0;
  faulty->add_rule(forever);
  auto gave_up = retrying.get_range(RangeRequest{"k", 0, 5, ""}, std::as_writable_bytes(std::span<char>(buf)));
  REQUIRE(!gave_up.ok());
  CHECK(gave_up.error().message().find("gave up after 5 attempts") != std::string::npos);
}

TEST_CASE("ObjectByteSource merges near ranges and clips at the end", "[unit]") {
  auto memory = std::make_shared<MemoryObjectStore>();
  std::string data = test::ramp(3, 0, 1 << 20);
  memory->put_bytes("obj", data);
  auto info = memory->head("obj");
  REQUIRE(info.ok());
  ObjectByteSourceConfig cfg;
  cfg.merge_gap_bytes = 100;
  cfg.max_request_bytes = 64 << 10;
  auto src = ObjectByteSource::from_info(memory, *info, cfg);
  std::vector<std::string> bufs = {std::string(10, '\0'), std::string(20, '\0'), std::string(30, '\0'), std::string(40, '\0'),
                                   std::string(500, '\0')};
  std::vector<ReadRequest> reqs = {
      {1000, std::as_writable_bytes(std::span<char>(bufs[0])), 0},             // 1000..1010
      {1050, std::as_writable_bytes(std::span<char>(bufs[1])), 0},             // gap 40: merged
      {500000, std::as_writable_bytes(std::span<char>(bufs[2])), 0},           // far: its own GET
      {1010, std::as_writable_bytes(std::span<char>(bufs[3])), 0},             // overlaps the first group
      {(1 << 20) - 100, std::as_writable_bytes(std::span<char>(bufs[4])), 0},  // clipped to 100
  };
  REQUIRE(src->read_ranges(reqs).ok());
  CHECK(memory->calls(StoreOp::kGetRange) == 3);
  CHECK(bufs[0] == data.substr(1000, 10));
  CHECK(bufs[1] == data.substr(1050, 20));
  CHECK(bufs[2] == data.substr(500000, 30));
  CHECK(bufs[3] == data.substr(1010, 40));
  CHECK(reqs[4].bytes_read == 100);
  CHECK(bufs[4].substr(0, 100) == data.substr(data.size() - 100));
  // open(): one request fetches the tail, size and etag; reads inside the tail cost nothing.
  auto opened = ObjectByteSource::open(memory, "obj");
  REQUIRE(opened.ok());
  uint64_t calls = memory->calls(StoreOp::kGetRange) + memory->calls(StoreOp::kHead);
  std::string tail(1000, '\0');
  REQUIRE(*(*opened)->read_at(data.size() - 1000, std::as_writable_bytes(std::span<char>(tail))) == 1000);
  CHECK(tail == data.substr(data.size() - 1000));
  CHECK(memory->calls(StoreOp::kGetRange) + memory->calls(StoreOp::kHead) == calls);
}

TEST_CASE("an exact key looked up with its tail: the tail comes back, and reads inside it cost nothing", "[unit]") {
  auto memory = std::make_shared<MemoryObjectStore>();
  const std::string v = entry_version({"/w/deps"});
  const std::string data = test::ramp(4, 0, 3 << 20);
  const std::string name = *entry_object_key("", "deps-1", v);
  memory->put_bytes(name, data);
  const uint64_t tail_bytes = 1 << 20;
  auto r = resolve_cache_key(*memory, "", "deps-1", {}, v, tail_bytes);
  REQUIRE(r.ok());
  REQUIRE(r->match);
  CHECK(r->match->exact);
  CHECK(r->match->object.key == name);
  CHECK(r->match->object.size == data.size());
  CHECK(r->tail == data.substr(data.size() - tail_bytes));
  // Without tail_bytes, as before: no tail. A miss stays a miss (the tail read's kNotFound).
  auto plain = resolve_cache_key(*memory, "", "deps-1", {}, v);
  REQUIRE(plain.ok());
  CHECK(plain->tail.empty());
  auto miss = resolve_cache_key(*memory, "", "deps-2", {}, v, tail_bytes);
  REQUIRE(miss.ok());
  CHECK(!miss->match);
  CHECK(miss->tail.empty());
  // A tail longer than the object is the whole object.
  memory->put_bytes(*entry_object_key("", "small", v), "tiny");
  auto small = resolve_cache_key(*memory, "", "small", {}, v, tail_bytes);
  REQUIRE(small.ok());
  CHECK(small->tail == "tiny");

  auto src = ObjectByteSource::from_tail(memory, r->match->object, r->tail);
  REQUIRE(src.ok());
  CHECK((*src)->requests() == 1);  // the lookup's read
  const uint64_t before = memory->calls(StoreOp::kGetRange);
  std::string inside(300 << 10, '\0');
  REQUIRE(*(*src)->read_at(data.size() - inside.size(), std::as_writable_bytes(std::span<char>(inside))) == inside.size());
  CHECK(inside == data.substr(data.size() - inside.size()));
  CHECK(memory->calls(StoreOp::kGetRange) == before);
  CHECK((*src)->requests() == 1);
  // A read reaching into the tail (an index larger than it) asks only for the bytes before it.
  std::string across(1536 << 10, '\0');
  const uint64_t at = data.size() - across.size();
  REQUIRE(*(*src)->read_at(at, std::as_writable_bytes(std::span<char>(across))) == across.size());
  CHECK(across == data.substr(at));
  CHECK(memory->calls(StoreOp::kGetRange) == before + 1);
  CHECK((*src)->bytes_fetched() == tail_bytes + (512 << 10));
  // Released (a mount, once its index is parsed): the same bytes come from the store again.
  (*src)->release_tail();
  std::string again(1000, '\0');
  REQUIRE(*(*src)->read_at(data.size() - again.size(), std::as_writable_bytes(std::span<char>(again))) == again.size());
  CHECK(again == data.substr(data.size() - again.size()));
  CHECK(memory->calls(StoreOp::kGetRange) == before + 2);
  // A tail that cannot be the object's is refused.
  CHECK(!ObjectByteSource::from_tail(memory, small->match->object, "longer than tiny").ok());
}

TEST_CASE("UploadSink streams into put; uncommitted means nothing published", "[unit]") {
  auto memory = std::make_shared<MemoryObjectStore>();
  std::string data = test::ramp(1, 0, 3 << 20);
  {
    UploadSink sink(memory, "a", PutOptions{}, 4096);  // a tiny pipe: write() must block and resume
    for (size_t off = 0; off < data.size(); off += 100000)
      REQUIRE(sink.write(std::as_bytes(std::span<const char>(data).subspan(off, std::min<size_t>(100000, data.size() - off)))).ok());
    REQUIRE(sink.commit().ok());
    REQUIRE(sink.published());
    CHECK(sink.published()->size == data.size());
  }
  CHECK(*memory->get_bytes("a") == data);
  {
    UploadSink sink(memory, "b", PutOptions{}, 4096);
    REQUIRE(sink.write(std::as_bytes(std::span<const char>(data).first(10000))).ok());
  }  // destroyed without commit
  CHECK(!memory->contains("b"));
  PutOptions once;
  once.create_only = true;
  UploadSink dup(memory, "a", once, 4096);
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) s = dup.write(std::as_bytes(std::span<const char>(data).first(100000)));
  if (s.ok()) s = dup.commit();
  CHECK(s.code() == ErrorCode::kAlreadyExists);
}

TEST_CASE("Content-Range and HTTP dates", "[unit]") {
  auto cr = parse_content_range("bytes 100-199/1000");
  REQUIRE(cr);
  CHECK(cr->first == 100);
  CHECK(cr->last == 199);
  CHECK(cr->total == 1000);
  for (const char* bad : {"bytes 5-1/10", "bytes 0-10/10", "bytes */10", "items 0-1/2", "bytes 0-1/x", ""})
    CHECK(!parse_content_range(bad));
  CHECK(parse_http_time("Fri, 24 May 2013 00:00:00 GMT") == 1369353600);
  CHECK(parse_http_time("2013-05-24T00:00:00.000Z") == 1369353600);
}

TEST_CASE("AWS credentials and region from the environment and profile files", "[unit]") {
  test::TempDir home;
  std::filesystem::create_directories(home.path() + "/.aws");
  std::ofstream(home.path() + "/.aws/credentials")
      << "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = default-secret-must-not-leak\n"
         "[ci]\naws_access_key_id=AKCI\naws_secret_access_key=s2\naws_session_token = tok\n";
  std::ofstream(home.path() + "/.aws/config") << "[profile ci]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:1\n";
  for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                        "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"})
    ::unsetenv(v);
  ::setenv("HOME", home.path().c_str(), 1);
  auto c = load_aws_credentials();
  REQUIRE(c.ok());
  CHECK(c->access_key_id == "AKDEFAULT");
  CHECK(aws_region() == "us-east-1");
  ::setenv("AWS_PROFILE", "ci", 1);
  c = load_aws_credentials();
  REQUIRE(c.ok());
  CHECK(c->access_key_id == "AKCI");
  CHECK(c->session_token == "tok");
  CHECK(aws_region() == "eu-west-3");
  CHECK(aws_endpoint_url() == "http://127.0.0.1:1");
  ::setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "s3", 1);
  c = load_aws_credentials();
  CHECK(c->access_key_id == "AKENV");
  ::setenv("AWS_PROFILE", "missing", 1);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  c = load_aws_credentials();
  REQUIRE(!c.ok());
  CHECK(c.error().code() == ErrorCode::kPermissionDenied);
  // The secret is long and has dashes so that it cannot turn up by chance in the message's
  // path (mkdtemp's random suffix once contained "s1", the secret this test used before).
  CHECK(c.error().message().find("default-secret-must-not-leak") == std::string::npos);
  // CredentialSource: reload() reports a change only when the loader's answer changed.
  int calls = 0;
  CredentialSource src([&]() -> Result<AwsCredentials> { return AwsCredentials{"AK", ++calls < 3 ? "old" : "new", ""}; });
  CHECK(src.current()->secret_access_key == "old");
  CHECK(!src.reload());
  CHECK(src.reload());
  CHECK(src.current()->secret_access_key == "new");
}
