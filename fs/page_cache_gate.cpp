// SPDX-License-Identifier: MIT
#include "fs/page_cache_gate.h"

namespace lazycache::fs {

bool PageCacheGate::begin(uint64_t ino) {
  std::lock_guard lock(mu_);
  if (cut_.count(ino) != 0) return false;
  ++in_flight_[ino];
  return true;
}

void PageCacheGate::end(uint64_t ino) {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(ino);
  if (it == in_flight_.end()) return;
  if (--it->second == 0) in_flight_.erase(it);
  ended_.notify_all();
}

void PageCacheGate::cut_off(uint64_t ino) {
  std::unique_lock lock(mu_);
  cut_.insert(ino);
  ended_.wait(lock, [&] { return in_flight_.count(ino) == 0; });
}

void PageCacheGate::mark(uint64_t ino) {
  std::lock_guard lock(mu_);
  cut_.insert(ino);
}

bool PageCacheGate::is_cut_off(uint64_t ino) const {
  std::lock_guard lock(mu_);
  return cut_.count(ino) != 0;
}

}  // namespace lazycache::fs
