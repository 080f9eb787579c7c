// SPDX-License-Identifier: MIT
#include "remote/testing/memory_object_store.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

#include "remote/testing/ramp.h"

using namespace lazycache;
using namespace lazycache::remote;
using namespace lazycache::remote::testing;

namespace {

BodyReader reader_over(const std::string& bytes, size_t chunk = 7) {
  auto pos = std::make_shared<size_t>(0);
  return [&bytes, pos, chunk](std::span<std::byte> out) -> Result<size_t> {
    size_t n = std::min({chunk, out.size(), bytes.size() - *pos});
    std::memcpy(out.data(), bytes.data() + *pos, n);
    *pos += n;
    return n;
  };
}

std::string read_range(ObjectStore& s, const std::string& key, uint64_t off, uint64_t len, const std::string& etag = "") {
  std::string buf(len, '\0');
  auto n = s.get_range(RangeRequest{key, off, len, etag}, std::as_writable_bytes(std::span(buf)));
  REQUIRE(n.ok());
  buf.resize(*n);
  return buf;
}

}  // namespace

TEST_CASE("memory store: put, head and ranged reads return the stored bytes", "[unit]") {
  MemoryObjectStore store;
  const std::string body = ramp_bytes(3, 0, 100000);
  auto info = store.put("a/b.tar.zst", reader_over(body, 4096), PutOptions{});
  REQUIRE(info.ok());
  CHECK(info->size == body.size());
  auto h = store.head("a/b.tar.zst");
  REQUIRE(h.ok());
  CHECK(h->etag == info->etag);
  CHECK(h->size == 100000);
  CHECK(read_range(store, "a/b.tar.zst", 12345, 777) == ramp_bytes(3, 12345, 777));
  // Short only at the end of the object.
  CHECK(read_range(store, "a/b.tar.zst", 99990, 100) == ramp_bytes(3, 99990, 10));
  CHECK(read_range(store, "a/b.tar.zst", 100000, 5).empty());
  CHECK(store.calls(StoreOp::kGetRange) == 3);
  CHECK(store.calls(StoreOp::kPut) == 1);
}

TEST_CASE("memory store: errors match the ObjectStore contract", "[unit]") {
  MemoryObjectStore store;
  store.put_bytes("k", "hello");
  std::string buf(10, '\0');
  auto out = std::as_writable_bytes(std::span(buf));
  CHECK(store.head("missing").error().code() == ErrorCode::kNotFound);
  CHECK(store.get_range({"missing", 0, 1, ""}, out).error().code() == ErrorCode::kNotFound);
  CHECK(store.get_range({"k", 0, 0, ""}, out).error().code() == ErrorCode::kInvalidArgument);
  CHECK(store.get_range({"k", 6, 1, ""}, out).error().code() == ErrorCode::kInvalidArgument);
  CHECK(store.get_range({"k", 0, 20, ""}, out).error().code() == ErrorCode::kInvalidArgument);
  for (const char* bad : {"", "/abs", "a/../b", "..", "a/./b"}) {
    INFO(bad);
    CHECK(store.head(bad).error().code() == ErrorCode::kInvalidArgument);
  }
  CHECK(store.remove("missing").ok());
}

TEST_CASE("memory store: a replaced object fails reads pinned to the old ETag", "[unit]") {
  MemoryObjectStore store;
  auto v1 = store.put_bytes("k", ramp_bytes(1, 0, 64));
  CHECK(read_range(store, "k", 0, 8, v1.etag) == ramp_bytes(1, 0, 8));
  // Same bytes uploaded again is still a new version.
  auto v2 = store.put_bytes("k", ramp_bytes(1, 0, 64));
  CHECK(v2.etag != v1.etag);
  std::string buf(8, '\0');
  auto r = store.get_range({"k", 0, 8, v1.etag}, std::as_writable_bytes(std::span(buf)));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == ErrorCode::kPreconditionFailed);
  CHECK(r.error().message().find('k') != std::string::npos);
}

TEST_CASE("memory store: create-only put never replaces and a failed body leaves nothing", "[unit]") {
  MemoryObjectStore store;
  const std::string a = "first", b = "second";
  REQUIRE(store.put("k", reader_over(a), PutOptions{.create_only = true}).ok());
  auto again = store.put("k", reader_over(b), PutOptions{.create_only = true});
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == ErrorCode::kAlreadyExists);
  CHECK(*store.get_bytes("k") == "first");

  int calls = 0;
  BodyReader failing = [&](std::span<std::byte> out) -> Result<size_t> {
    if (++calls > 2) return Status(ErrorCode::kIo, "disk gone");
    out[0] = std::byte{'x'};
    return size_t{1};
  };
  auto r = store.put("partial", failing, PutOptions{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == ErrorCode::kIo);
  CHECK_FALSE(store.contains("partial"));
}

TEST_CASE("memory store: list pages through a prefix in key order", "[unit]") {
  MemoryObjectStore store(MemoryObjectStoreConfig{.name = "t", .list_page_size = 2});
  for (const char* k : {"p/c", "p/a", "q/x", "p/b", "o/z", "p/d", "p"}) store.put_bytes(k, k);
  std::vector<std::string> keys;
  std::string token;
  int pages = 0;
  do {
    auto page = store.list("p/", token);
    REQUIRE(page.ok());
    CHECK(page->objects.size() <= 2);
    for (auto& o : page->objects) keys.push_back(o.key);
    token = page->next_continuation;
    REQUIRE(++pages < 10);
  } while (!token.empty());
  CHECK(keys == std::vector<std::string>{"p/a", "p/b", "p/c", "p/d"});
  auto all = store.list("", "");
  REQUIRE(all.ok());
  CHECK(all->objects.front().key == "o/z");
}

TEST_CASE("memory store: newer puts have later last_modified", "[unit]") {
  MemoryObjectStore store;
  store.set_next_last_modified(100);
  auto a = store.put_bytes("a", "1");
  auto b = store.put_bytes("b", "2");
  CHECK(a.last_modified_s == 100);
  CHECK(b.last_modified_s == 101);
}

TEST_CASE("memory store: concurrent readers and writers see whole versions only", "[unit][concurrency]") {
  MemoryObjectStore store;
  // Version v holds ramp data with seed v; any mix of two versions in one read is detectable.
  store.put_bytes("k", ramp_bytes(0, 0, 4096));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      std::string buf(4096, '\0');
      while (!stop.load()) {
        auto n = store.get_range({"k", 0, 4096, ""}, std::as_writable_bytes(std::span(buf)));
        if (!n.ok() || *n != 4096) {
          torn++;
          continue;
        }
        uint64_t seed = static_cast<uint8_t>(buf[0]);
        if (first_ramp_mismatch(seed, 0, std::as_bytes(std::span(buf))) != -1) torn++;
      }
    });
  }
  for (uint64_t v = 1; v < 200; ++v) store.put_bytes("k", ramp_bytes(v % 251, 0, 4096));
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(torn.load() == 0);
}
