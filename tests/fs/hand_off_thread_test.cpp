// SPDX-License-Identifier: MIT
// HandOffThread (fs/hand_off_thread.h): jobs run in order on one thread, wait_idle waits for
// them, the byte bound refuses a job (and frees as jobs finish), stop() drops what is queued.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "fs/hand_off_thread.h"

using lazycache::fs::HandOffThread;

TEST_CASE("hand-off thread: jobs run in order, off the caller's thread; wait_idle waits for them", "[unit][concurrency]") {
  HandOffThread t(1000);
  std::mutex mu;
  std::vector<int> ran;
  std::atomic<bool> other_thread{true};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 50; ++i) {
    REQUIRE(t.push(10, [&, i] {
      other_thread = other_thread && std::this_thread::get_id() != caller;
      std::lock_guard lock(mu);
      ran.push_back(i);
    }));
  }
  t.wait_idle();
  std::lock_guard lock(mu);
  REQUIRE(ran.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(ran[static_cast<size_t>(i)] == i);
  CHECK(other_thread);
}

TEST_CASE("hand-off thread: past the byte bound a job is refused, and room comes back as jobs finish", "[unit][concurrency]") {
  HandOffThread t(100);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  REQUIRE(t.push(60, [gate] { gate.wait(); }));  // running, holds 60
  REQUIRE(t.push(40, [] {}));                    // queued: 100 in all
  CHECK_FALSE(t.push(1, [] {}));
  release.set_value();
  t.wait_idle();
  CHECK(t.push(100, [] {}));
  t.wait_idle();
}

TEST_CASE("hand-off thread: stop waits for the job running and drops the queued ones", "[unit][concurrency]") {
  HandOffThread t(1000);
  std::promise<void> started, release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  REQUIRE(t.push(1, [&, gate] {
    started.set_value();
    gate.wait();
    ++ran;
  }));
  REQUIRE(t.push(1, [&] { ++ran; }));
  started.get_future().wait();
  std::thread stopper([&] { t.stop(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  release.set_value();
  stopper.join();
  CHECK(ran == 1);
  t.push(1, [&] { ++ran; });  // after stop: never runs
  t.wait_idle();
  CHECK(ran == 1);
}
