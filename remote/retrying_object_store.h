// SPDX-License-Identifier: MIT
// File: remote/retrying_object_store.h -- RetryPolicy (capped exponential backoff with full
// jitter) and RetryingObjectStore, the one layer that retries whole store calls.
//
// Only kUnavailable and kTimeout are retried (common/status.h). put() is forwarded once: a
// streamed body cannot be replayed, so the multipart engine retries each part itself with the
// same RetryPolicy (a part is held in memory and re-sendable); nothing else retries.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "remote/object_store.h"

namespace lazycache::remote {

struct RetryConfig {
  int max_attempts = 5;       // total tries of one call; AWS SDKs use 3-5 for reads
  int base_delay_ms = 100;    // first backoff cap: ~ one loopback/region round trip x 10
  int max_delay_ms = 10'000;  // one sleep never exceeds this
  int deadline_ms = 120'000;  // no new attempt starts after this much time in the call
  // Called before each retry's sleep with what is retried, why, and when: "GET key: <error>;
  // retrying in 0.4 s (attempt 2 of 5)". The CLI prints it, so a long wait is never silent;
  // empty: quiet. Called from the retrying thread; must be thread-safe.
  std::function<void(const std::string&)> on_retry;
};

// Pure policy plus the sleep; thread-safe.
class RetryPolicy {
 public:
  explicit RetryPolicy(RetryConfig config = {}) : config_(config) {}
  // Full jitter: uniform in [0, min(max_delay, base * 2^attempt)] ms; attempt counts from 0.
  static int64_t backoff_ms(const RetryConfig& config, int attempt, uint64_t random_value);
  // Runs op until it succeeds, fails with a non-retryable code, or attempts/deadline run out.
  // `what` names the call for the final error ("GET key (gave up after 5 attempts): ...").
  Status run(const std::string& what, const std::function<Status()>& op) const;
  const RetryConfig& config() const { return config_; }
  // Retries performed by all run() calls (for status lines and tests).
  uint64_t retries() const { return retries_.load(); }

 private:
  RetryConfig config_;
  mutable std::atomic<uint64_t> retries_{0};
};

class RetryingObjectStore final : public ObjectStoreWrapper {
 public:
  RetryingObjectStore(std::shared_ptr<ObjectStore> inner, RetryConfig config = {})
      : ObjectStoreWrapper(std::move(inner)), policy_(config) {}

  Result<ObjectInfo> head(std::string_view key) override;
  Result<size_t> get_range(const RangeRequest& req, std::span<std::byte> out) override;
  Result<TailRead> get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) override;
  Result<ListPage> list(std::string_view prefix, std::string_view continuation) override;
  Status remove(std::string_view key) override;
  TransferStats transfer_stats() const override {
    TransferStats s = inner_->transfer_stats();
    s.retries += policy_.retries();
    return s;
  }
  const RetryPolicy& policy() const { return policy_; }
  const std::shared_ptr<ObjectStore>& inner() const { return inner_; }

 private:
  RetryPolicy policy_;
};

}  // namespace lazycache::remote
