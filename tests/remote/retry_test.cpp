// SPDX-License-Identifier: MIT
// Retries, stalls and concurrency observed over real HTTP, through tests/tools/fault_proxy.py:
//   [faults]        the read-only HTTP store against the proxy serving a directory
//   [swift-faults]  the S3 store against the proxy in front of Swift (ctest fixture "swift")
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "remote/http_object_store.h"
#include "remote/object_byte_source.h"
#include "remote/retrying_object_store.h"
#include "remote_test_support.h"

using namespace lazycache;
using namespace lazycache::remote;
using namespace lazycache::remote::test;

namespace {

constexpr uint64_t kMiB = 1 << 20;
const RetryConfig kFastRetry{5, 10, 200, 60000};

std::string get(ObjectStore& store, const std::string& key, uint64_t off, uint64_t len, Status* error = nullptr) {
  std::string out(len, '\0');
  auto n = store.get_range(RangeRequest{key, off, len, ""}, std::as_writable_bytes(std::span<char>(out)));
  if (!n.ok()) {
    if (error) *error = n.error();
    return "";
  }
  out.resize(*n);
  return out;
}

}  // namespace

TEST_CASE("retries over HTTP: 503, 429, reset, stall; wrong ranges are not retried", "[faults]") {
  TempDir dir;
  std::string data = ramp(6, 0, 2 * kMiB);
  std::ofstream(dir.path() + "/obj", std::ios::binary) << data;
  FaultProxy proxy("", dir.path());
  TransferConfig transfer;
  transfer.low_speed_time_s = 1;  // a 1 s stall counts as a dead connection here
  auto http = std::make_shared<HttpObjectStore>(proxy.url(), "", transfer);
  RetryingObjectStore store(http, kFastRetry);

  SECTION("two 503 SlowDown then success") {
    proxy.set_plan(R"([{"method": "GET", "matches": [1, 2], "fault": "status", "code": 503}])");
    int before = proxy.request_count();
    CHECK(get(store, "obj", 1000, 5000) == data.substr(1000, 5000));
    CHECK(proxy.request_count() - before == 3);
    CHECK(store.policy().retries() == 2);
  }
  SECTION("429 then success") {
    proxy.set_plan(R"([{"method": "GET", "matches": [1, 1], "fault": "status", "code": 429}])");
    CHECK(get(store, "obj", 0, 100) == data.substr(0, 100));
    CHECK(store.policy().retries() == 1);
  }
  SECTION("connection reset mid-body then success") {
    proxy.set_plan(R"([{"method": "GET", "matches": [1, 1], "fault": "reset", "after_bytes": 1000}])");
    CHECK(get(store, "obj", 0, kMiB) == data.substr(0, kMiB));
    CHECK(store.policy().retries() == 1);
  }
  SECTION("a streamed read reset mid-body: told as it came, then resumed where it stopped") {
    proxy.set_plan(R"([{"method": "GET", "matches": [1, 1], "fault": "reset", "after_bytes": 300000}])");
    std::string out(kMiB, '\0');
    std::vector<size_t> told;
    RangeRequest req{"obj", 0, kMiB, ""};
    req.on_progress = [&](size_t filled) { told.push_back(filled); };
    auto n = store.get_range(req, std::as_writable_bytes(std::span<char>(out)));
    REQUIRE(n.ok());
    CHECK(out == data.substr(0, kMiB));
    CHECK(store.policy().retries() == 1);
    REQUIRE(told.size() > 2);  // more than once per attempt: the body was told as it came
    CHECK(std::is_sorted(told.begin(), told.end()));
    CHECK(told.back() == kMiB);
  }
  SECTION("stalled body: low-speed timeout, then success") {
    proxy.set_plan(R"([{"method": "GET", "matches": [1, 1], "fault": "stall", "after_bytes": 100, "seconds": 5, "then": "close"}])");
    auto t0 = std::chrono::steady_clock::now();
    CHECK(get(store, "obj", 0, 500000) == data.substr(0, 500000));
    CHECK(store.policy().retries() == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  }
  SECTION("a shifted Content-Range is kCorrupt and not retried") {
    proxy.set_plan(R"([{"method": "GET", "fault": "bad_range", "shift": 1}])");
    Status err;
    CHECK(get(store, "obj", 4096, 100, &err).empty());
    CHECK(err.code() == ErrorCode::kCorrupt);
    CHECK(store.policy().retries() == 0);
  }
  SECTION("a 503 that never ends gives up with a clear message") {
    proxy.set_plan(R"([{"method": "GET", "fault": "status", "code": 503}])");
    Status err;
    get(store, "obj", 0, 10, &err);
    CHECK(err.code() == ErrorCode::kUnavailable);
    CHECK(err.message().find("gave up after 5 attempts") != std::string::npos);
    CHECK(err.message().find("HTTP 503") != std::string::npos);
  }
}

TEST_CASE("ObjectByteSource runs its GETs concurrently", "[faults]") {
  TempDir dir;
  std::string data = ramp(8, 0, 8 * kMiB);
  std::ofstream(dir.path() + "/obj", std::ios::binary) << data;
  FaultProxy proxy("", dir.path());
  auto http = std::make_shared<HttpObjectStore>(proxy.url(), "");
  auto info = http->head("obj");
  REQUIRE(info.ok());
  // Every ranged GET is held for 0.5 s by the server: 8 of them one after another take 4 s.
  proxy.set_plan(R"([{"method": "GET", "fault": "stall", "after_bytes": 0, "seconds": 0.5}])");
  ObjectByteSourceConfig cfg;
  cfg.concurrency = 8;
  auto src = ObjectByteSource::from_info(http, *info, cfg);
  std::vector<std::string> bufs(8, std::string(1000, '\0'));
  std::vector<ReadRequest> reqs;
  for (size_t i = 0; i < 8; ++i) reqs.push_back({i * kMiB, std::as_writable_bytes(std::span<char>(bufs[i])), 0});
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(src->read_ranges(reqs).ok());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < 8; ++i) CHECK(bufs[i] == data.substr(i * kMiB, 1000));
  CHECK(http->http().max_in_flight() >= 4);
  CHECK(seconds < 2.5);
}

TEST_CASE("a cancelled source ends its GET in flight at once, retries nothing, and fails later reads", "[faults]") {
  // ByteSource::cancel: a mount's exit ends the fill's range reads instead of waiting for them.
  TempDir dir;
  std::string data = ramp(9, 0, 4 * kMiB);
  std::ofstream(dir.path() + "/obj", std::ios::binary) << data;
  FaultProxy proxy("", dir.path());
  auto http = std::make_shared<HttpObjectStore>(proxy.url(), "");
  auto info = http->head("obj");
  REQUIRE(info.ok());
  auto store = std::make_shared<RetryingObjectStore>(http, kFastRetry);
  auto src = ObjectByteSource::from_info(store, *info);
  // The body stops after 64 KiB for 20 s: the read is in flight, its first bytes told.
  proxy.set_plan(R"([{"method": "GET", "fault": "stall", "after_bytes": 65536, "seconds": 20, "then": "close"}])");
  const int before = proxy.request_count();
  std::string buf(2 * kMiB, '\0');
  std::atomic<size_t> told{0};
  Result<size_t> got = size_t{0};
  std::thread reader([&] { got = src->read_at_streaming(0, std::as_writable_bytes(std::span<char>(buf)), [&](size_t n) { told = n; }); });
  for (int i = 0; i < 500 && told.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(told.load() > 0);
  const auto t0 = std::chrono::steady_clock::now();
  src->cancel();
  reader.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code() == ErrorCode::kCancelled);
  CHECK(seconds < 3);                          // curl's progress tick (once a second while stalled), not the stall's 20 s
  CHECK(proxy.request_count() - before == 1);  // never retried
  CHECK(store->policy().retries() == 0);
  // Later reads fail at once, without a request.
  auto again = src->read_at(0, std::as_writable_bytes(std::span<char>(buf.data(), 1000)));
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == ErrorCode::kCancelled);
  CHECK(proxy.request_count() - before == 1);
}

TEST_CASE("S3 through faults: part retries, aborted uploads, expired credentials", "[swift-faults]") {
  S3Env env = load_s3_env("LC_S3_ENV");
  FaultProxy proxy(env.endpoint, "");
  S3Env via = env;
  via.endpoint = proxy.url();
  std::string prefix = "faults/" + run_id();
  PutOptions opts;
  opts.part_size_bytes = 5 * kMiB;
  opts.concurrency = 2;
  std::string data = ramp(2, 0, 11 * kMiB);

  SECTION("a part that gets 503 is re-sent and the upload completes") {
    auto store = s3_store_from_env(via, prefix);
    proxy.set_plan(R"([{"method": "PUT", "path": "partNumber=2", "matches": [1, 2], "fault": "status", "code": 503}])");
    auto put = store->put("retried", string_body(std::make_shared<const std::string>(data)), opts);
    INFO(put.status().to_string());
    REQUIRE(put.ok());
    std::string back(data.size(), '\0');
    auto n = store->get_range(RangeRequest{"retried", 0, data.size(), ""}, std::as_writable_bytes(std::span<char>(back)));
    REQUIRE(n.ok());
    CHECK(back == data);
  }
  SECTION("a part that always fails aborts the upload: none is left on the server") {
    auto store = s3_store_from_env(via, prefix);
    proxy.set_plan(R"([{"method": "PUT", "path": "partNumber=2", "fault": "status", "code": 500}])");
    auto put = store->put("doomed", string_body(std::make_shared<const std::string>(data)), opts);
    REQUIRE(!put.ok());
    CHECK(put.error().message().find("part 2") != std::string::npos);
    auto direct = s3_store_from_env(env, prefix);
    auto uploads = direct->list_multipart_uploads("doomed");
    REQUIRE(uploads.ok());
    CHECK(uploads->empty());
    CHECK(direct->head("doomed").error().code() == ErrorCode::kNotFound);
  }
  SECTION("403 ExpiredToken: credentials are re-read and the request re-sent") {
    S3Config config;
    auto ep = parse_endpoint(via.endpoint);
    REQUIRE(ep.ok());
    config.endpoint = *ep;
    config.bucket = "lazycache";
    config.prefix = prefix;
    config.region = env.region;
    int loads = 0;
    auto creds = std::make_shared<CredentialSource>([&]() -> Result<AwsCredentials> {
      ++loads;  // the first answer is "stale"; later ones are the valid credentials
      return AwsCredentials{env.access_key, loads == 1 ? "stale-secret" : env.secret_key, ""};
    });
    S3ObjectStore store(config, creds);
    proxy.set_plan(R"([{"matches": [1, 1], "fault": "expire"}])");
    auto put = store.put("refreshed", string_body(std::make_shared<const std::string>("fresh")), {});
    INFO(put.status().to_string());
    REQUIRE(put.ok());
    CHECK(loads == 2);
  }
}

// The multipart producer's exception path: a body that throws (as a part's bad_alloc would)
// while workers upload must reach the caller, with the workers joined (std::terminate before
// issue 19) and the upload aborted.
TEST_CASE("S3 multipart: a body that throws mid-upload joins the workers and aborts the upload", "[swift-faults]") {
  S3Env env = load_s3_env("LC_S3_ENV");
  auto store = s3_store_from_env(env, "throwing/" + run_id());
  PutOptions opts;
  opts.part_size_bytes = 5 * kMiB;
  opts.concurrency = 2;
  uint64_t given = 0;
  BodyReader body = [&](std::span<std::byte> out) -> Result<size_t> {
    if (given >= 7 * kMiB) throw std::bad_alloc();  // inside part 2, while part 1 uploads
    const size_t n = std::min<size_t>(out.size(), kMiB);
    std::fill(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n), std::byte{'x'});
    given += n;
    return n;
  };
  CHECK_THROWS_AS(store->put("thrown", body, opts), std::bad_alloc);
  auto uploads = store->list_multipart_uploads("thrown");
  REQUIRE(uploads.ok());
  CHECK(uploads->empty());
  CHECK(store->head("thrown").error().code() == ErrorCode::kNotFound);
}
