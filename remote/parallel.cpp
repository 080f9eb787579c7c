// SPDX-License-Identifier: MIT
#include "remote/parallel.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lazycache::remote {

Status run_bounded(size_t n, int concurrency, const std::function<Status(size_t)>& task) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;  // guards first_error
  Status first_error;
  auto worker = [&] {
    for (;;) {
      if (failed.load()) return;
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      Status s;
      try {
        s = task(i);
      } catch (const std::exception& e) {
        s = Status(ErrorCode::kInternal, std::string("task threw: ") + e.what());
      }
      if (!s.ok()) {
        std::lock_guard lock(mu);
        if (!failed.exchange(true)) first_error = s;
        return;
      }
    }
  };
  size_t threads = std::min<size_t>(n, static_cast<size_t>(concurrency <= 0 ? 1 : concurrency));
  if (threads <= 1) {
    worker();
    return first_error;
  }
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return first_error;
}

}  // namespace lazycache::remote
