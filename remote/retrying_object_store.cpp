// SPDX-License-Identifier: MIT
#include "remote/retrying_object_store.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace lazycache::remote {

int64_t RetryPolicy::backoff_ms(const RetryConfig& config, int attempt, uint64_t random_value) {
  int64_t cap = config.base_delay_ms;
  for (int i = 0; i < attempt && cap < config.max_delay_ms; ++i) cap *= 2;
  cap = std::min<int64_t>(cap, config.max_delay_ms);
  if (cap <= 0) return 0;
  return static_cast<int64_t>(random_value % static_cast<uint64_t>(cap + 1));
}

Status RetryPolicy::run(const std::string& what, const std::function<Status()>& op) const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto start = std::chrono::steady_clock::now();
  Status last;
  for (int attempt = 0;; ++attempt) {
    last = op();
    if (last.ok() || !last.retryable()) return last;
    bool out_of_attempts = attempt + 1 >= config_.max_attempts;
    int64_t delay = backoff_ms(config_, attempt, rng());
    auto elapsed = std::chrono::steady_clock::now() - start;
    bool out_of_time = elapsed + std::chrono::milliseconds(delay) > std::chrono::milliseconds(config_.deadline_ms);
    if (out_of_attempts || out_of_time) return last.with_context(what + " (gave up after " + std::to_string(attempt + 1) + " attempts)");
    retries_.fetch_add(1);
    if (config_.on_retry) {
      char when[32];
      std::snprintf(when, sizeof when, "%.1f s", static_cast<double>(delay) / 1000);
      config_.on_retry(what + ": " + last.to_string() + "; retrying in " + when + " (attempt " + std::to_string(attempt + 2) + " of " +
                       std::to_string(config_.max_attempts) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
  }
}

namespace {
// Runs a Result-returning call under the policy; the error carries the "gave up" context.
template <typename T, typename F>
Result<T> retry_result(const RetryPolicy& policy, const std::string& what, F&& call) {
  Result<T> r = Status(ErrorCode::kInternal, "never attempted");
  Status s = policy.run(what, [&] {
    r = call();
    return r.status();
  });
  if (!s.ok()) return s;
  return r;
}
}  // namespace

Result<ObjectInfo> RetryingObjectStore::head(std::string_view key) {
  return retry_result<ObjectInfo>(policy_, "HEAD " + std::string(key), [&] { return inner_->head(key); });
}

Result<size_t> RetryingObjectStore::get_range(const RangeRequest& req, std::span<std::byte> out) {
  if (!req.on_progress) return retry_result<size_t>(policy_, "GET " + req.key, [&] { return inner_->get_range(req, out); });
  // A streamed read: the bytes already told stay as they are (their reader may be using them),
  // so an attempt after a failure asks only for the rest, into the rest of `out`.
  size_t told = 0;
  return retry_result<size_t>(policy_, "GET " + req.key, [&]() -> Result<size_t> {
    if (told >= req.length) return told;  // all of it came before the failure
    const size_t base = told;
    RangeRequest rest = req;
    rest.offset += base;
    rest.length -= base;
    rest.on_progress = [&told, &req, base](size_t filled) {
      told = base + filled;
      req.on_progress(told);
    };
    auto n = inner_->get_range(rest, out.subspan(base));
    if (!n.ok()) return n.error();
    return base + *n;
  });
}

Result<TailRead> RetryingObjectStore::get_tail(std::string_view key, uint64_t length, std::span<std::byte> out) {
  return retry_result<TailRead>(policy_, "GET tail of " + std::string(key), [&] { return inner_->get_tail(key, length, out); });
}

Result<ListPage> RetryingObjectStore::list(std::string_view prefix, std::string_view continuation) {
  return retry_result<ListPage>(policy_, "LIST " + std::string(prefix), [&] { return inner_->list(prefix, continuation); });
}

Status RetryingObjectStore::remove(std::string_view key) {
  return policy_.run("DELETE " + std::string(key), [&] { return inner_->remove(key); });
}

}  // namespace lazycache::remote
