// SPDX-License-Identifier: MIT
// File: remote/testing/fault_injecting_object_store.h -- FaultInjectingObjectStore, a decorator
// that breaks chosen calls of an inner store so unit tests can name the call being broken:
// "3rd get_range returns kUnavailable", "2nd get_range stops after 100 bytes", "head reports a
// different ETag", "every 5th call (seed 42) flips a body bit". Test-only.
//
// Rules are matched per op in the order they were added; the first rule that fires wins. A call
// index is 1-based and counted per op over the life of the store (all keys), so "the k-th call"
// is deterministic for single-threaded tests. one_in decisions hash (seed, op, call index), so a
// soak run replays the same faults for the same seed whatever the thread interleaving.
//
// Every injected fault is recorded (op, call index, key, what was done) for failure messages.
// Thread-safe. A rule with a Gate blocks the faulted call until the test releases the gate, for
// deterministic interleavings without sync points in production code.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "remote/object_store.h"
#include "remote/testing/store_op.h"

namespace lazycache::remote::testing {

// A latch a faulted call waits on. arrived() tells the test that a call is parked here.
class Gate {
 public:
  void release();
  // Blocks until at least `n` calls have reached the gate, or `timeout` passes; false on timeout.
  bool wait_arrived(size_t n = 1, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  size_t arrived() const;
  void pass();  // called by the faulted call: count arrival, wait for release()

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t arrived_ = 0;     // guarded by mu_
  bool released_ = false;  // guarded by mu_
};

// What to do to a call. Several effects may be combined (delay, then truncate, say).
struct FaultAction {
  std::optional<ErrorCode> fail;  // return this code instead of calling the inner store
  std::string message = "injected fault";
  // get_range: return at most this many bytes (a store lying about a short body mid-object).
  // put: the body reader fails with kUnavailable after this many bytes (connection lost mid-upload).
  std::optional<uint64_t> truncate_after_bytes;
  // head/put: the returned ETag is altered. get_range: the request's if_match is altered, so
  // the inner store answers as if the object had been replaced since head().
  bool flip_etag = false;
  // get_range: flip one bit of the returned bytes (position from the seed and call index).
  bool flip_body_bit = false;
  // Sleep before the call (a stall as seen by the caller).
  std::chrono::milliseconds delay{0};
  // Park the call until the gate is released (after delay, before the inner call).
  std::shared_ptr<Gate> gate;
};

struct FaultRule {
  StoreOp op = StoreOp::kGetRange;
  uint64_t first_call = 1;   // 1-based index of the first call of `op` that is faulted
  uint64_t times = 1;        // how many consecutive calls from first_call; 0 = unlimited
  std::string key_contains;  // empty: any key; else only calls whose key contains this
  FaultAction action;
};

struct FaultRecord {
  StoreOp op;
  uint64_t call_index = 0;  // 1-based, per op
  std::string key;
  std::string what;  // "fail kUnavailable", "truncate after 100 bytes", ...
};

class FaultInjectingObjectStore final : public ObjectStoreWrapper {
 public:
  explicit FaultInjectingObjectStore(std::shared_ptr<ObjectStore> inner) : ObjectStoreWrapper(std::move(inner)) {}

  // Faults call(s) of rule.op from rule.first_call on.
  void add_rule(FaultRule rule);
  // Convenience: the k-th call of `op` (1-based) gets `action`.
  void fail_nth(StoreOp op, uint64_t k, FaultAction action);
  // Each call of `op` is faulted with probability 1/n, decided by hashing (seed, op, index).
  void set_one_in(StoreOp op, uint32_t n, uint64_t seed, FaultAction action);
  // Removes every rule and one_in setting (recorded faults and call counts stay).
  void clear_rules();

  uint64_t calls(StoreOp op) const { return calls_[static_cast<size_t>(op)].load(); }
  std::vector<FaultRecord> faults() const;
  size_t fault_count() const;
  // One line per fault: "get_range #3 key k: fail unavailable". For REQUIRE messages.
  std::string describe_faults() const;

  Result<ObjectInfo> head(std::string_view key) override;
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override;
  Result<ObjectInfo> put(std::string_view key, const BodyReader& body, const PutOptions& opts) override;
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override;
  Status remove(std::string_view key) override;
  // Not forwarded as one call: runs ObjectStore's default (head, then a pinned get_range)
  // through this store, so head and get_range rules apply to tail reads too.
  Result<TailRead> get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) override {
    return ObjectStore::get_tail(key, length, out);
  }

 private:
  struct OneIn {
    uint32_t n = 0;
    uint64_t seed = 0;
    FaultAction action;
  };
  // Counts the call and returns the action to apply, if any (recording it).
  std::optional<FaultAction> next(StoreOp op, std::string_view key, uint64_t* index);
  Status pre_call(StoreOp op, uint64_t index, std::string_view key, const FaultAction& a);

  mutable std::mutex mu_;  // guards rules_, one_in_, records_
  std::vector<FaultRule> rules_;
  std::array<std::optional<OneIn>, static_cast<size_t>(StoreOp::kCount)> one_in_;
  std::vector<FaultRecord> records_;
  std::array<std::atomic<uint64_t>, static_cast<size_t>(StoreOp::kCount)> calls_{};
};

}  // namespace lazycache::remote::testing
