// SPDX-License-Identifier: MIT
// InodeHandles (fs/inode_handles.h): one open per file while cached, the oldest dropped at the
// bound, a holder keeping a dropped handle until it lets go, and open errors not kept.
#include "fs/inode_handles.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using lazycache::ErrorCode;
using lazycache::Result;
using lazycache::Status;
using lazycache::fs::InodeHandles;

namespace {
struct Opens {
  std::mutex mu;
  std::vector<uint32_t> opened;
  std::multiset<uint64_t> released;
  uint64_t next = 100;
};
InodeHandles make(Opens& o, size_t capacity) {
  return InodeHandles(
      [&o](uint32_t id) -> Result<uint64_t> {
        if (id == 13) return Status(ErrorCode::kNotFound, "no entry 13");
        std::lock_guard lock(o.mu);
        o.opened.push_back(id);
        return o.next++;
      },
      [&o](uint64_t h) {
        std::lock_guard lock(o.mu);
        o.released.insert(h);
      },
      capacity);
}
}  // namespace

TEST_CASE("InodeHandles opens a file once while it is cached", "[inode_handles]") {
  Opens o;
  auto handles = make(o, 4);
  auto a = handles.get(7);
  auto b = handles.get(7);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(**a == **b);
  CHECK(o.opened == std::vector<uint32_t>{7});
  CHECK(handles.size() == 1);
}

TEST_CASE("InodeHandles drops the oldest at its bound, and a holder keeps a dropped handle", "[inode_handles]") {
  Opens o;
  {
    auto handles = make(o, 2);
    auto first = handles.get(1);  // held through the drops below, as a READ in flight holds it
    REQUIRE(first.ok());
    const uint64_t first_handle = **first;
    REQUIRE(handles.get(2).ok());
    REQUIRE(handles.get(3).ok());  // drops 1 from the cache
    CHECK(handles.size() == 2);
    CHECK(o.released.empty());  // 1 is still held
    first = Result<std::shared_ptr<const uint64_t>>(Status(ErrorCode::kInternal, "let go"));
    CHECK(o.released == std::multiset<uint64_t>{first_handle});
    REQUIRE(handles.get(1).ok());  // opened again, dropping 2
    CHECK(o.opened == std::vector<uint32_t>{1, 2, 3, 1});
    CHECK(o.released.size() == 2);
  }
  // The cache gone: every handle it gave was released exactly once.
  CHECK(o.released.size() == 4);
  CHECK(std::set<uint64_t>(o.released.begin(), o.released.end()).size() == 4);
}

TEST_CASE("InodeHandles keeps nothing when the open fails", "[inode_handles]") {
  Opens o;
  auto handles = make(o, 4);
  auto h = handles.get(13);
  REQUIRE_FALSE(h.ok());
  CHECK(h.error().code() == ErrorCode::kNotFound);
  CHECK(handles.size() == 0);
}

TEST_CASE("InodeHandles gives threads asking for the same files one handle each", "[inode_handles][concurrency]") {
  Opens o;
  {
    auto handles = make(o, 8);
    std::atomic<int> failed{0};  // Catch's assertions are not for other threads
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&handles, &failed] {
        for (int i = 0; i < 2000; ++i) {
          if (!handles.get(static_cast<uint32_t>(20 + i % 16)).ok()) ++failed;
        }
      });
    }
    for (auto& t : threads) t.join();
    CHECK(failed == 0);
    CHECK(handles.size() == 8);
  }
  // Each open was released once, and no file had two handles cached at a time.
  CHECK(o.released.size() == o.opened.size());
  CHECK(std::set<uint64_t>(o.released.begin(), o.released.end()).size() == o.released.size());
}
