// SPDX-License-Identifier: MIT
#include "remote/testing/fault_injecting_object_store.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <thread>

#include "remote/testing/memory_object_store.h"
#include "remote/testing/ramp.h"

using namespace lazycache;
using namespace lazycache::remote;
using namespace lazycache::remote::testing;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  std::shared_ptr<MemoryObjectStore> mem = std::make_shared<MemoryObjectStore>();
  FaultInjectingObjectStore faulty{mem};
  std::string buf = std::string(1000, '\0');
  Fixture() { mem->put_bytes("obj", ramp_bytes(9, 0, 1000)); }
  Result<size_t> get(uint64_t off, uint64_t len, std::string etag = "") {
    return faulty.get_range({"obj", off, len, std::move(etag)}, std::as_writable_bytes(std::span(buf)));
  }
};

}  // namespace

TEST_CASE("fault store: the 3rd get_range fails, the others pass through", "[unit]") {
  Fixture f;
  f.faulty.fail_nth(StoreOp::kGetRange, 3, FaultAction{.fail = ErrorCode::kUnavailable, .message = "HTTP 503"});
  CHECK(f.get(0, 10).ok());
  CHECK(f.get(0, 10).ok());
  auto third = f.get(0, 10);
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().code() == ErrorCode::kUnavailable);
  CHECK(third.error().message().find("call #3") != std::string::npos);
  CHECK(third.error().message().find("obj") != std::string::npos);
  CHECK(f.get(0, 10).ok());
  CHECK(f.faulty.calls(StoreOp::kGetRange) == 4);
  // The inner store never saw the failed call.
  CHECK(f.mem->calls(StoreOp::kGetRange) == 3);
  auto rec = f.faulty.faults();
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].call_index == 3);
  CHECK(rec[0].op == StoreOp::kGetRange);
  CHECK(f.faulty.describe_faults() == "get_range #3 key obj: fail unavailable\n");
}

TEST_CASE("fault store: truncation returns a short count mid-object", "[unit]") {
  Fixture f;
  f.faulty.fail_nth(StoreOp::kGetRange, 1, FaultAction{.truncate_after_bytes = 100});
  auto n = f.get(200, 500);
  REQUIRE(n.ok());
  CHECK(*n == 100);
  CHECK(first_ramp_mismatch(9, 200, std::as_bytes(std::span(f.buf)).first(100)) == -1);
}

TEST_CASE("fault store: a flipped body bit changes exactly one bit", "[unit]") {
  Fixture f;
  f.faulty.fail_nth(StoreOp::kGetRange, 1, FaultAction{.flip_body_bit = true});
  auto n = f.get(0, 1000);
  REQUIRE(n.ok());
  REQUIRE(*n == 1000);
  auto bytes = std::as_bytes(std::span(f.buf));
  int64_t at = first_ramp_mismatch(9, 0, bytes);
  REQUIRE(at >= 0);
  auto diff = static_cast<unsigned>(bytes[static_cast<size_t>(at)] ^ ramp_byte(9, static_cast<uint64_t>(at)));
  CHECK((diff & (diff - 1)) == 0);  // a single bit
  CHECK(first_ramp_mismatch(9, static_cast<uint64_t>(at) + 1, bytes.subspan(static_cast<size_t>(at) + 1)) == -1);
}

TEST_CASE("fault store: flip_etag makes a pinned read look like a replaced object", "[unit]") {
  Fixture f;
  auto info = f.faulty.head("obj");
  REQUIRE(info.ok());
  f.faulty.fail_nth(StoreOp::kGetRange, 2, FaultAction{.flip_etag = true});
  CHECK(f.get(0, 10, info->etag).ok());
  auto r = f.get(0, 10, info->etag);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == ErrorCode::kPreconditionFailed);

  f.faulty.fail_nth(StoreOp::kHead, 2, FaultAction{.flip_etag = true});
  auto h2 = f.faulty.head("obj");
  REQUIRE(h2.ok());
  CHECK(h2->etag != info->etag);
}

TEST_CASE("fault store: a put cut off mid-body leaves no object", "[unit]") {
  Fixture f;
  const std::string body = ramp_bytes(1, 0, 300000);
  size_t pos = 0;
  BodyReader reader = [&](std::span<std::byte> out) -> Result<size_t> {
    size_t n = std::min(out.size(), body.size() - pos);
    std::memcpy(out.data(), body.data() + pos, n);
    pos += n;
    return n;
  };
  f.faulty.fail_nth(StoreOp::kPut, 1, FaultAction{.truncate_after_bytes = 100000});
  auto r = f.faulty.put("new", reader, PutOptions{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == ErrorCode::kUnavailable);
  CHECK(r.error().message().find("after 100000 bytes") != std::string::npos);
  CHECK_FALSE(f.mem->contains("new"));
  // The retry (2nd put) goes through whole.
  pos = 0;
  REQUIRE(f.faulty.put("new", reader, PutOptions{}).ok());
  CHECK(*f.mem->get_bytes("new") == body);
}

TEST_CASE("fault store: a rule limited by key and count", "[unit]") {
  Fixture f;
  f.mem->put_bytes("other", "zzzz");
  f.faulty.add_rule(FaultRule{.op = StoreOp::kHead,
                              .first_call = 2,
                              .times = 2,
                              .key_contains = "obj",
                              .action = FaultAction{.fail = ErrorCode::kPermissionDenied}});
  CHECK(f.faulty.head("obj").ok());                                            // #1
  CHECK(f.faulty.head("obj").error().code() == ErrorCode::kPermissionDenied);  // #2
  CHECK(f.faulty.head("other").ok());                                          // #3 other key
  CHECK(f.faulty.head("obj").ok());                                            // #4 past the window
  CHECK(f.faulty.fault_count() == 1);
  f.faulty.add_rule(FaultRule{
      .op = StoreOp::kRemove, .first_call = 1, .times = 0, .key_contains = {}, .action = FaultAction{.fail = ErrorCode::kUnavailable}});
  for (int i = 0; i < 5; ++i) CHECK_FALSE(f.faulty.remove("obj").ok());
  CHECK(f.mem->contains("obj"));
  f.faulty.clear_rules();
  CHECK(f.faulty.remove("obj").ok());
  CHECK_FALSE(f.mem->contains("obj"));
}

TEST_CASE("fault store: one_in is seeded and replays the same calls", "[unit]") {
  auto run = [](uint64_t seed) {
    Fixture f;
    f.faulty.set_one_in(StoreOp::kGetRange, 4, seed, FaultAction{.fail = ErrorCode::kUnavailable});
    std::vector<uint64_t> failed;
    for (int i = 1; i <= 400; ++i) {
      if (!f.get(0, 1).ok()) failed.push_back(static_cast<uint64_t>(i));
    }
    return failed;
  };
  auto a = run(42), b = run(42), c = run(43);
  CHECK(a == b);
  CHECK(a != c);
  // Roughly one in four; a loose bound so the check is about the rate, not luck.
  CHECK(a.size() > 60);
  CHECK(a.size() < 140);
}

TEST_CASE("fault store: delay stalls the call", "[unit]") {
  Fixture f;
  f.faulty.fail_nth(StoreOp::kGetRange, 1, FaultAction{.delay = 150ms});
  auto t0 = std::chrono::steady_clock::now();
  CHECK(f.get(0, 4).ok());
  CHECK(std::chrono::steady_clock::now() - t0 >= 150ms);
}

TEST_CASE("fault store: a gate parks the call until released", "[unit][concurrency]") {
  Fixture f;
  auto gate = std::make_shared<Gate>();
  f.faulty.fail_nth(StoreOp::kGetRange, 1, FaultAction{.gate = gate});
  auto fut = std::async(std::launch::async, [&] {
    std::string local(10, '\0');
    return f.faulty.get_range({"obj", 0, 10, ""}, std::as_writable_bytes(std::span(local))).ok();
  });
  REQUIRE(gate->wait_arrived(1));
  CHECK(fut.wait_for(50ms) == std::future_status::timeout);
  // Other calls are not held up by the parked one.
  CHECK(f.get(0, 10).ok());
  gate->release();
  CHECK(fut.get());
}

TEST_CASE("fault store: tail reads go through the faulted head and get_range", "[unit]") {
  Fixture f;
  std::string tail(100, '\0');
  auto out = std::as_writable_bytes(std::span(tail));
  auto ok = f.faulty.get_tail("obj", 100, out);
  REQUIRE(ok.ok());
  CHECK(ok->bytes == 100);
  CHECK(first_ramp_mismatch(9, 900, std::as_bytes(std::span(tail))) == -1);
  // An object replaced between the HEAD and the GET: the pinned read must fail.
  f.faulty.fail_nth(StoreOp::kHead, 2, FaultAction{.flip_etag = true});
  auto replaced = f.faulty.get_tail("obj", 100, out);
  REQUIRE_FALSE(replaced.ok());
  CHECK(replaced.error().code() == ErrorCode::kPreconditionFailed);
  f.faulty.fail_nth(StoreOp::kGetRange, 3, FaultAction{.fail = ErrorCode::kUnavailable});
  CHECK(f.faulty.get_tail("obj", 100, out).error().code() == ErrorCode::kUnavailable);
}
